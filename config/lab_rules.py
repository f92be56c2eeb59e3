"""The rules across keys of a lab as it is (docs/air-gap.md): a proxy, mirrors, a lab CA, no route out, and the
namespaces the stack creates. Each names the key to change and the fix; what is valid but worth a word is a
warning (`lab_warnings`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from config.registries import endpoint_path_warnings
from config.rke2 import DEFAULT_INSTALL_SCRIPT
from config.stack import StackConfig
from config.stack_parts import StackParts
from config.trust import is_private_host
from knowledge.driver_template import DRIVER_MOUNTS_ENV

LabRule = Callable[[StackParts], list[str]]


def _no_route_out(parts: StackParts) -> list[str]:
    """`airGapped: true` with a proxy: the two say opposite things. What a lab with no route out would fetch from
    the internet is the air-gap inventory's rule (components/air_gap.py), item by item."""
    if not parts.air_gapped or parts.proxy is None or not parts.proxy.enabled:
        return []
    return [
        "gpu-pool:airGapped: true says the lab has no route out, but gpu-pool:proxy is one: remove airGapped "
        "(a lab behind a proxy downloads through it) or the proxy"
    ]


def lab_urls(parts: StackParts) -> Iterator[tuple[str, str]]:
    """(key, URL) of every lab server a VM downloads from that the stack names: the installer mirror, the apt
    mirror, the registry mirrors' endpoints."""
    if parts.rke2 is not None:
        installer = parts.rke2.installer
        if installer.script != DEFAULT_INSTALL_SCRIPT:
            yield "gpu-pool:rke2.installer.script", installer.script
        if installer.artifacts is not None:
            yield "gpu-pool:rke2.installer.artifacts", installer.artifacts
    if parts.apt_mirror is not None:
        yield "gpu-pool:aptMirror.uri", parts.apt_mirror.uri
        if parts.apt_mirror.security_uri is not None:
            yield "gpu-pool:aptMirror.securityUri", parts.apt_mirror.security_uri
    for registry, mirror in (parts.registry_mirrors or {}).items():
        for endpoint in mirror.endpoint:
            yield f"gpu-pool:registryMirrors.{registry}", endpoint


def _who_fails(key: str) -> str:
    if key.startswith("gpu-pool:registryMirrors"):
        return "RKE2's agent and containerd fail with an x509 error on every pull from it"
    if key.startswith("gpu-pool:aptMirror"):
        return "apt refuses it (the first boot's packages, the driver container's kernel headers)"
    return "the first boot stops at its download (curl exit 60, 'SSL certificate problem')"


def _https_hosts_need_the_lab_ca(parts: StackParts) -> list[str]:
    """An https lab server with a private name carries a certificate of the lab's CA (no public CA issues one for
    such a name): without `trustedCa`, no VM trusts it."""
    if parts.trusted_ca is not None:
        return []
    problems = []
    for key, url in lab_urls(parts):
        parts_ = urlsplit(url)
        host = parts_.hostname or ""
        if parts_.scheme != "https" or not is_private_host(host):
            continue
        problems.append(
            f"{key}: {url} is https on a private name ({host}), which no public CA certifies, so its certificate "
            f"comes from your lab's CA, and the VMs trust none: {_who_fails(key)}; set gpu-pool:trustedCa to the "
            "lab CA's certificate (a PEM file path or its text; docs/air-gap.md, 'A lab CA')"
        )
    return problems


def _driver_env_keeps_the_proxy(parts: StackParts) -> list[str]:
    """extraValues.driver.env is a list, and Helm replaces a list: gpu-pool merges it with the proxy's variables by
    name, and a name gpu-pool:proxy sets must not be set twice; nor the digest of the ConfigMaps the driver mounts,
    which gpu-pool sets (components/gpu_platform/driver_template.py: a new CA or mirror restarts the driver)."""
    operator, proxy = parts.operator, parts.proxy
    if operator is None:
        return []
    driver = operator.extra_values.get("driver")
    env = driver.get("env") if isinstance(driver, dict) else None
    if not isinstance(env, list):
        return []
    ours: set[str] = set()
    if proxy is not None and proxy.enabled:
        ours = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}
        ours |= {name.lower() for name in ours}
    problems = []
    for index, item in enumerate(env):
        name = item.get("name") if isinstance(item, dict) else None
        key = f"gpu-pool:gpuOperator.extraValues.driver.env[{index}]"
        if name in ours:
            problems.append(
                f"{key}: {name} is set by gpu-pool:proxy (the driver container's proxy); change it there, and keep "
                "driver.env for your own variables"
            )
        elif name == DRIVER_MOUNTS_ENV:
            problems.append(
                f"{key}: {name} is gpu-pool's own (the digest of the apt sources and lab CA the driver mounts, so "
                "that a change of them restarts it): leave it out"
            )
    return problems


# Each key's default: the example of a name of its own.
_DEFAULT_NAMESPACES = {
    "gpu-pool:gpuOperator.namespace": "gpu-operator",
    "gpu-pool:smokeTest.namespace": "gpu-smoke-test",
    "gpu-pool:repair.healthCheck.namespace": "gpu-pool-health",
    "gpu-pool:repair.unattended.namespace": "gpu-pool-repair",
    "gpu-pool:repair.unattended.nodeCheckNamespace": "gpu-pool-node-check",
}


def _created_namespaces(parts: StackParts) -> list[tuple[str, str]]:
    """(key, namespace) of each namespace the stack creates, the operator's first."""
    found: list[tuple[str, str]] = []
    if parts.operator_namespace is not None:
        found.append(("gpu-pool:gpuOperator.namespace", parts.operator_namespace))
    if parts.smoke is not None and parts.smoke.enabled:
        found.append(("gpu-pool:smokeTest.namespace", parts.smoke.namespace))
    repair = parts.repair
    if repair is not None and repair.health_check.enabled:
        found.append(("gpu-pool:repair.healthCheck.namespace", repair.health_check.namespace))
    if repair is not None and repair.unattended.enabled:
        found.append(("gpu-pool:repair.unattended.namespace", repair.unattended.namespace))
        found.append(("gpu-pool:repair.unattended.nodeCheckNamespace", repair.unattended.node_check_namespace))
    return found


def _namespaces_of_their_own(parts: StackParts) -> list[str]:
    """Each namespace the stack creates is one Namespace resource with its own Pod Security level: two keys naming
    one namespace register it twice (`up` fails: already exists), or relabel the operator's privileged namespace
    restricted (its driver pods are then refused). The smoke test in the operator's namespace has its own rule."""
    problems = []
    seen: dict[str, str] = {}
    for key, namespace in _created_namespaces(parts):
        first = seen.setdefault(namespace, key)
        if first == key or {first, key} == {"gpu-pool:gpuOperator.namespace", "gpu-pool:smokeTest.namespace"}:
            continue
        example = _DEFAULT_NAMESPACES[key] if _DEFAULT_NAMESPACES[key] != namespace else f"{namespace}-2"
        problems.append(
            f"{key}: {namespace!r} is already {first}'s; each namespace gpu-pool creates is its own (one Namespace "
            f"with its own Pod Security level): give it another name, e.g. {example}"
        )
    return problems


LAB_RULES: tuple[tuple[str, LabRule], ...] = (
    ("no-route-out-has-no-proxy", _no_route_out),
    ("https-lab-hosts-need-the-lab-ca", _https_hosts_need_the_lab_ca),
    ("driver-env-keeps-the-proxy", _driver_env_keeps_the_proxy),
    ("namespaces-of-their-own", _namespaces_of_their_own),
)


def lab_warnings(cfg: StackConfig, parts: StackParts) -> list[str]:
    """Valid, but worth a word: an https mirror on a public name must chain to a public CA or to trustedCa; a
    mirror endpoint with a path (a Harbor project wants a rewrite)."""
    trusted = "a public CA or to gpu-pool:trustedCa" if parts.trusted_ca else "a public CA (or set gpu-pool:trustedCa)"
    notes = [
        f"{key}: {url} is https: its certificate must chain to {trusted}, the only roots the VMs trust"
        for key, url in lab_urls(parts)
        if urlsplit(url).scheme == "https" and not is_private_host(urlsplit(url).hostname or "")
    ]
    return notes + endpoint_path_warnings(cfg.mirrors)
