"""What a domain's worker is rolled to, and the commands a day-2 turn runs on its VM over SSH (the files, RKE2).
A turn's acts on its Node (the hold, the operator's skip label, the cordon, the drain, the record, the stop) are
node/'s transitions, which the node-steps script runs (components/gpu_failure_domain/node_steps_script.py).

A domain's *rollout state* is what its GPU worker was last rolled to and gated on: the RKE2 release, the kernel
pin, the VM's cold-start settings and mapped card, the driver, the digest of everything that renders into the
operator's driver DaemonSet's pod template (components/gpu_platform/driver_template.py: a chart bump, a driver
value, the ConfigMaps it mounts; each gives the DaemonSet a new revision, which the operator rolls only on a cordoned
node, FIELD-REVIEW-6 WRONG-1) and the sharing profile's content. A turn's last
step writes it on the Node (observed.ROLLOUT_ANNOTATION), so the next `pulumi preview` knows from the cluster
what each worker runs (turns.py decides each domain's turn from it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import shlex
from collections.abc import Mapping
from urllib.parse import urlsplit

from components.gpu_failure_domain.cloud_init import (
    APT_PROXY_FILE,
    EGRESS_FILES,
    RKE2_AGENT_ENV_FILE,
    RKE2_INSTALL_URL,
    SOURCE_AGENT_ENV,
    SOURCES_HEADER,
    SYSTEM_TRUSTED_CA_FILE,
    UBUNTU_ARCHIVE,
    apt_sources_file,
    egress_files,
    proxy_secret_files,
)
from components.gpu_failure_domain.node_steps import mapped_device
from components.gpu_failure_domain.proxmox_vm import reboot_settings
from components.gpu_failure_domain.registries import REGISTRY_TLS_DIR, RKE2_REGISTRIES_FILE
from components.gpu_platform.driver_template import stack_driver_template
from config.failure_domain import FailureDomainConfig
from config.proxy import ProxyConfig, reached_directly
from config.rke2 import Rke2InstallerConfig
from config.rollout import DRAIN_TIMEOUT_SECONDS
from config.stack import StackConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_APP, GPU_FEATURE_DISCOVERY_APP, OPERAND_APP_LABEL

# What each rollout component's change does to a worker, in the words `make diff` uses; the keys of the state.
CHANGE_WORDS: Mapping[str, str] = {
    "rke2": "RKE2 agent upgrade",
    "kernel": "kernel upgrade and reboot",
    "vm": "VM power cycle (cold-start settings or card)",
    "driver": "driver upgrade (the operator's, on the drained node only)",
    "driver-template": "driver DaemonSet template change, driver version kept (chart, driver values or the "
    "ConfigMaps it mounts): the operator replaces the driver pod on the drained node only",
    "sharing": "device plugin and GPU Feature Discovery restart (sharing profile)",
    "files": "proxy, registry and apt mirror files rewritten, rke2-agent restarted (cloud-init runs once)",
}
CHANGE_KEYS: tuple[str, ...] = tuple(CHANGE_WORDS)
# How long a drain may wait for pods to leave (PodDisruptionBudgets are respected; evictions are retried).
DRAIN_TIMEOUT = f"{DRAIN_TIMEOUT_SECONDS // 60}m"


# A Node recorded before the driver template's digest has only the version: what rollout_state's `driver-template`
# key is taken as there (turns.py).
DRIVER_TEMPLATE_KEY = "driver-template"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def rollout_state(domain: FailureDomainConfig, stack: StackConfig) -> dict[str, str]:
    """What a domain's worker is rolled to once its turn is done (stable JSON: it is written on the Node)."""
    return {
        "rke2": stack.rke2.version,
        "kernel": domain.kernel or "",
        "vm": _digest([reboot_settings(domain), mapped_device(domain)]),
        "driver": stack.gpu_operator.driver_version,
        DRIVER_TEMPLATE_KEY: stack_driver_template(stack),
        "sharing": f"{domain.sharing}@{_digest(stack.sharing_profiles[domain.sharing].model_dump(mode='json'))}",
        # Only where the stack sets a proxy or mirrors: a Node recorded without the key has none, so a stack
        # without them records (and plans) exactly what it did before the key existed.
        **({"files": _digest(files)} if (files := _files_state(domain, stack)) else {}),
    }


def guest_os(stack: StackConfig) -> str:
    # The proxmox model sets it from the cloud image's name or requires it; the default only types the fallback.
    return stack.proxmox.guest_os or "ubuntu-24.04"


# Stands in for the proxy's login in the rollout state: a changed proxy URL rolls the files turn, the login's value
# (a secret, never in a plan or on a Node) does not, as registryAuth's does not.
LOGIN_IN_STATE = "gpu-pool:proxyAuth"


def _files_state(domain: FailureDomainConfig, stack: StackConfig) -> list[dict[str, str]]:
    secret = proxy_secret_files(domain, stack.rke2, stack.proxy, stack.apt_mirror, LOGIN_IN_STATE)
    return domain_egress_files(domain, stack) + secret


def domain_egress_files(domain: FailureDomainConfig, stack: StackConfig) -> list[dict[str, str]]:
    return egress_files(
        domain, stack.rke2, stack.proxy, stack.mirrors, stack.apt_mirror, guest_os(stack), stack.trusted_ca
    )


def archive_sources(stack: StackConfig) -> dict[str, str]:
    """The release's sources without a mirror: Ubuntu's archive, what a new VM's cloud-init writes."""
    return apt_sources_file(UBUNTU_ARCHIVE, guest_os(stack))


# The first lines of the release's sources as gpu-pool's files turn and cloud-init's apt module write them: a file
# with neither was written by hand, and a turn without a mirror leaves it alone.
GENERATED_SOURCES_MARKS = (SOURCES_HEADER.splitlines()[0], "## Note, this file is written by cloud-init on first boot")


def node_files_command(files: list[dict[str, str]], archive: dict[str, str], *, proxy_login: bool = False) -> str:
    """Runs on the VM over SSH (a drained node): the egress files the stack asks for written, the others it owns
    removed (a proxy taken out of the stack leaves none behind), then rke2-agent restarted to read them (its unit
    reads /etc/default/rke2-agent at start, and RKE2 turns registries.yaml into containerd's hosts at start).
    The release's apt sources are never removed (apt would have none): without a mirror, `archive` (Ubuntu's own,
    as a new VM's cloud-init writes it) replaces a file gpu-pool or cloud-init wrote, and a hand-written one is
    left alone. The content travels base64-encoded: a proxy password's quotes reach the file as written. Each file
    is written beside its place and renamed, so a failed write never leaves half a file."""
    wanted = {file["path"]: file for file in files}
    # registries.yaml and the TLS files it names arrive on stdin (cloud_init.registry_files as
    # registries.secret_files_payload: they may carry gpu-pool:registryAuth), never in this text.
    # With a proxy login, its two files arrive on stdin as well (cloud_init.proxy_secret_files).
    from_stdin = (RKE2_REGISTRIES_FILE, SYSTEM_TRUSTED_CA_FILE) + (
        (RKE2_AGENT_ENV_FILE, APT_PROXY_FILE) if proxy_login else ()
    )
    parts = ["set -e", "payload=$(cat)", _write_payload()]
    for path in EGRESS_FILES:
        file, quoted = wanted.get(path), shlex.quote(path)
        if path not in from_stdin:
            parts.append(_write(file) if file is not None else f"sudo rm -f {quoted}")
    parts.append(_system_trust(wanted.get(SYSTEM_TRUSTED_CA_FILE)))
    mirror, quoted = wanted.get(archive["path"]), shlex.quote(archive["path"])
    marks = " ".join(f"-e {shlex.quote('^' + mark)}" for mark in GENERATED_SOURCES_MARKS)
    left = shlex.quote(f"{archive['path']} was written by hand: left as it is")
    parts.append(
        _write(mirror)
        if mirror is not None
        else f"if [ ! -e {quoted} ] || grep -q {marks} {quoted}; then {_write(archive)}; else echo {left}; fi"
    )
    parts += ["sudo systemctl restart rke2-agent", "echo 'egress files written, rke2-agent restarted'"]
    return "; ".join(parts)


def _write(file: Mapping[str, str]) -> str:
    """One file written beside its place, then renamed over it."""
    path = file["path"]
    quoted = shlex.quote(path)
    encoded = base64.b64encode(file["content"].encode()).decode()
    write = f"sudo sh -c {shlex.quote(f'umask 077; cat > {quoted}.new')}"
    steps = [f"sudo mkdir -p {shlex.quote(posixpath.dirname(path))}", f"echo {encoded} | base64 -d | {write}"]
    steps += [f"sudo chmod {file['permissions']} {quoted}.new", f"sudo mv {quoted}.new {quoted}"]
    return "; ".join(steps)


# Where cloud-init's ca_certs module wrote the lab CA at first boot (cc_ca_certs: cloud-init-ca-cert-<n>.crt, or
# cloud-init-ca-certs.crt before 23.x), filled only from gpu-pool's user data.
CLOUD_INIT_CA_FILES = "/usr/local/share/ca-certificates/cloud-init-ca-cert*.crt"


def _system_trust(ca: Mapping[str, str] | None) -> str:
    """The lab CA into the VM's system store (update-ca-certificates: curl, apt and containerd read its bundle), in
    place of the copy cloud-init wrote at first boot; or, once the stack has none, out of it."""
    ours = shlex.quote(SYSTEM_TRUSTED_CA_FILE)
    if ca is not None:
        return f"{_write(ca)}; sudo rm -f {CLOUD_INIT_CA_FILES}; sudo update-ca-certificates >/dev/null"
    return (
        f"if [ -e {ours} ] || ls {CLOUD_INIT_CA_FILES} >/dev/null 2>&1; then sudo rm -f {ours} {CLOUD_INIT_CA_FILES}; "
        "sudo update-ca-certificates --fresh >/dev/null; fi"
    )


def _write_payload() -> str:
    """The files stdin carries, `<path> <mode> <base64>` a line, each written beside its place and renamed; the
    TLS files of a host no longer named are removed, and registries.yaml when stdin has none."""
    registries, tls = shlex.quote(RKE2_REGISTRIES_FILE), shlex.quote(REGISTRY_TLS_DIR)
    write = (
        'sudo mkdir -p "$(dirname "$path")"; printf %s "$data" | base64 -d | '
        """sudo sh -c 'umask 077; cat > "$1.new"' _ "$path"; """
        'sudo chmod "$mode" "$path.new"; sudo mv "$path.new" "$path"'
    )
    return (
        f"sudo rm -rf {tls}; "
        f'printf "%s\\n" "$payload" | while read -r path mode data; do [ -n "$path" ] || continue; {write}; done; '
        f'printf "%s\\n" "$payload" | grep -q "^{RKE2_REGISTRIES_FILE} " || sudo rm -f {registries}'
    )


def apt_mirror_check_command(sources: Mapping[str, str], proxy: ProxyConfig | None) -> str:
    """Runs on the VM over SSH before the drain of a files turn with `gpu-pool:aptMirror`: apt itself fetches the
    release's signed indexes with the sources the turn will write and the proxy it will leave (none: DIRECT), into
    a folder of its own, so neither the VM's sources nor its package lists change. `--error-on=any` makes a
    mirror that does not answer, or lacks the release, fail (apt-get update only warns of those by default). A
    mirror the VM cannot use stops the wave here, naming it, with nothing drained."""
    # apt reads a sources part by its extension: deb822 `.sources`, one-line `.list`.
    part = "check.sources" if sources["path"].endswith(".sources") else "check.list"
    encoded = base64.b64encode(sources["content"].encode()).decode()
    urls = {"http": proxy.http if proxy else None, "https": proxy.https if proxy else None}
    proxies = " ".join(f"-o Acquire::{scheme}::Proxy={shlex.quote(url or 'DIRECT')}" for scheme, url in urls.items())
    if proxy is not None and proxy.enabled and proxy.login:
        # The login is in apt's own root-only proxy file on the VM, never on this command line: apt reads it there.
        proxies = ""
    uris = sorted({line.split()[1] for line in sources["content"].splitlines() if line.startswith(("URIs:", "deb "))})
    # A mirror NO_PROXY reaches directly goes direct, as the files turn's apt settings say (apt never reads NO_PROXY).
    hosts = dict.fromkeys(urlsplit(uri).hostname or "" for uri in uris)
    direct = [host for host in hosts if host and proxy is not None and proxy.enabled and reached_directly(proxy, host)]
    proxies += "".join(
        f" -o Acquire::{scheme}::Proxy::{host}=DIRECT" for host in direct for scheme in ("http", "https")
    )
    failed = shlex.quote(
        f"gpu-pool: apt on this VM cannot read the release from gpu-pool:aptMirror ({', '.join(uris)}): apt's last "
        "lines above say why (a mirror that lacks the release, or a proxy that does not reach it: apt sends it "
        "through gpu-pool:proxy); nothing was drained\n"
    )
    options = (
        '-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$check/parts" '
        '-o Dir::State::Lists="$check/lists" -o Dir::Cache="$check/cache" '
        # The throwaway folder is the SSH user's: apt's download sandbox user could not write there.
        "-o APT::Sandbox::User=root"
    )
    return (
        'set -e; check=$(mktemp -d); mkdir -p "$check/parts" "$check/lists/partial" "$check/cache/archives/partial"; '
        f'echo {encoded} | base64 -d > "$check/parts/{part}"; '
        f'if ! sudo apt-get update -q --error-on=any {options} {proxies} >"$check/said" 2>&1; then '
        f'tail -n 5 "$check/said" >&2; printf {failed} >&2; sudo rm -rf "$check"; exit 1; fi; '
        f'sudo rm -rf "$check"; echo {shlex.quote("apt reads the release from " + ", ".join(uris))}'
    )


def _drain(kubectl: str, node: str) -> str:
    """A removed domain's drain (its retire step's delete): `kubectl drain`, the node is gone right after. A turn's
    own drain is node/drain.py's, run by the node-steps script."""
    return f"{kubectl} drain {shlex.quote(node)} --ignore-daemonsets --delete-emptydir-data --timeout={DRAIN_TIMEOUT}"


def device_plugin_restart_command(node: str, kubectl: str, namespace: str) -> str:
    """The device plugin and GPU Feature Discovery each read the profile only at start: their config-managers
    react to a changed node label only (k8s-device-plugin v0.20.0 cmd/config-manager/main.go:273-280; NVIDIA
    gpu-sharing.rst: "The Operator does not monitor the time-slicing config maps"). A profile edited in place
    reaches the node only when both pods are recreated; restarting the plugin alone left GFD's labels
    (`nvidia.com/gpu.replicas`, the `-SHARED` product) on the old profile (FIELD-REVIEW-4 WRONG-5)."""
    selector = f"{OPERAND_APP_LABEL} in ({DEVICE_PLUGIN_APP},{GPU_FEATURE_DISCOVERY_APP})"
    return (
        f"{kubectl} -n {shlex.quote(namespace)} delete pod -l {shlex.quote(selector)} "
        f"--field-selector spec.nodeName={shlex.quote(node)} --wait=true --timeout=5m"
    )


def rke2_upgrade_command(
    version: str,
    env: Mapping[str, str] | None = None,
    installer: Rke2InstallerConfig | None = None,
    *,
    from_agent_env: bool = False,
) -> str:
    """Runs on the VM over SSH: the official installer at the pinned release, as the first-boot join does
    (INSTALL_RKE2_VERSION, https://docs.rke2.io/upgrades/manual_upgrade), then the agent restarted on it.
    `env`: the proxy's variables (cloud_init.proxy_environment), for curl and the installer's own downloads;
    passed through `sudo env`, since sudo's env_reset drops the caller's."""
    pinned = shlex.quote(version)
    script = installer.script if installer is not None else RKE2_INSTALL_URL
    artifacts = installer.artifacts if installer is not None else None
    mirror = f"INSTALL_RKE2_ARTIFACT_URL={shlex.quote(artifacts)} " if artifacts else ""
    assigned = "".join(f"{name}={shlex.quote(value)} " for name, value in (env or {}).items())
    if from_agent_env:
        # A proxy with a login: the variables are read as root from the file that carries it (0600), never
        # written on this command line.
        install = (
            f"curl -sfL {shlex.quote(script)} -o /tmp/install-rke2.sh && {mirror}INSTALL_RKE2_TYPE=agent "
            f"INSTALL_RKE2_VERSION={pinned} sh /tmp/install-rke2.sh"
        )
        return (
            f"set -e; sudo sh -c {shlex.quote(f'{SOURCE_AGENT_ENV}; {install}')}; sudo systemctl restart rke2-agent; "
            f"echo {shlex.quote(f'rke2-agent restarted on {version}')}"
        )
    # Downloaded first, not piped: in a pipe `set -e` only sees the shell's exit, never curl's (as cloud_init.py).
    return (
        "set -e; "
        f"{assigned}curl -sfL {shlex.quote(script)} -o /tmp/install-rke2.sh; "
        f"sudo {'env ' + assigned if assigned else ''}{mirror}INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION={pinned} "
        "sh /tmp/install-rke2.sh; "
        "sudo systemctl restart rke2-agent; "
        f"echo {shlex.quote(f'rke2-agent restarted on {version}')}"
    )


def node_cleanup_command(node: str, kubectl: str) -> str:
    """A removed domain's Node object outlives its VM (nothing deregisters it): deleted after the VM."""
    return f"{kubectl} delete node {shlex.quote(node)} --ignore-not-found --wait=false"


def retire_drain_command(node: str, kubectl: str) -> str:
    """A removed domain's node is drained before its VM stops (a VM's delete stops it first): its GPU pods leave
    with their PodDisruptionBudgets respected instead of dying with the VM. Nothing to drain if it never joined."""
    quoted = shlex.quote(node)
    return f"if {kubectl} get node {quoted} >/dev/null 2>&1; then {_drain(kubectl, node)}; fi"
