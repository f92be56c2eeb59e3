"""The invariant pass: each of the article's traps and the field reviews' fixes stated once, as a rule on what the
program really renders (the gpu-operator release's final values after every key and `extraValues` are merged, each
VM's cloud-init and RKE2 config, the node's labels and taint), not on the keys that lead there. A key that can
undo a trap fix, however documented, is caught here by what it does to the result.

Pure and run before anything is registered: the one validation of a stack (stack_check.py) passes
`rendered_problems` to config.validate, which runs it with the cross-key rules on whatever parts of the config parse.
docs/traps.md names the rule that guards each trap (the `RULES` ids); tests/test_rendered_plan.py breaks every
rule through every key in its `keys`, and on a rendered plan directly where no key reaches it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.air_gap import Fetched, air_gap_problems, inventory
from components.gpu_failure_domain.cloud_init import HELD_KERNEL_PACKAGES, rke2_agent_config, user_data_document
from components.gpu_failure_domain.first_boot import step_commands
from components.gpu_failure_domain.node_metadata import node_labels, registration_labels
from components.gpu_platform.apt_sources import APT_SOURCES_CONFIGMAP
from components.gpu_platform.dcgm_metrics import (
    DCGM_METRICS_CONFIGMAP,
    build_dcgm_metrics_csv,
    deployed_exporter_version,
    metrics_digest,
)
from components.gpu_platform.driver_template import driver_configmaps, mounts_digest
from components.gpu_platform.operator_values import DCGM_METRICS_DIGEST_ANNOTATION
from components.gpu_platform.release_values import driver_proxy, registered_crds, release_values
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP, build_time_slicing_config
from components.gpu_platform.trusted_ca import TRUSTED_CA_CONFIGMAP
from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from config.chart_values_guard import leaf_paths
from config.failure_domain import FailureDomainConfig
from config.rke2 import containerd_problem
from config.stack import StackConfig
from config.stack_parts import StackParts, parts_of
from knowledge.driver_matrix import driver_problem
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL, MANAGED_LABEL_PREFIXES
from knowledge.gpu_operator_chart import (
    CONTROL_PLANE_TOLERATION,
    DAEMONSETS_DEFAULT_TOLERATIONS,
    NFD_MASTER_DEFAULT_TOLERATIONS,
    NFD_WORKER_DEFAULT_TOLERATIONS,
)
from knowledge.gpu_operator_images import value_at
from knowledge.kubernetes import HOSTNAME_LABEL, LABEL_VALUE_MAX_LENGTH, kubelet_may_self_label
from knowledge.quantities import parse_quantity
from knowledge.rke2 import RKE2_CONTAINERD_SOCKET, RKE2_NVIDIA_RUNTIMES

NAMESPACE = "gpu-pool"
# What the article's traps need (its "The traps, from the driver up"): 512Mi OOM-kills the driver's compile of
# nvidia.ko and 4Gi does not; 256Mi OOM-kills the DCGM exporter once it loads its field set and 1Gi does not.
DRIVER_BUILD_MEMORY = "4Gi"
DCGM_EXPORTER_MEMORY = "1Gi"
# Stands in for the join token in the rendered cloud-init: the rules never read it.
TOKEN_PLACEHOLDER = "K10" + "0" * 64 + "::server:rendered-plan"
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class RenderedNode:
    """What one domain's worker is given: its cloud-init, RKE2 config and the labels and taint it will carry."""

    label: str
    domain: FailureDomainConfig
    labels: Mapping[str, str]
    taint: str
    agent_config: Mapping[str, Any] | None = None
    user_data: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{NAMESPACE}:failureDomains[{self.label}]"


@dataclass(frozen=True)
class RenderedPlan:
    parts: StackParts
    # The release's values, every key merged; None where the operator, Kyverno or monitoring config did not parse.
    values: Mapping[str, Any] | None = None
    crds_registered: bool = False
    marking: GpuNodeMarking | None = None
    nodes: tuple[RenderedNode, ...] = field(default_factory=tuple)


Check = Callable[[RenderedPlan], list[str]]


@dataclass(frozen=True)
class Rule:
    """One trap rule: its id (named in docs/traps.md), the trap it guards, what must hold, and the config keys
    (as written in a stack file, `[]` for every domain) that can break it."""

    id: str
    trap: str
    statement: str
    keys: tuple[str, ...]
    check: Check


# ----------------------------------------------------------------------------------------------- rendering


def render(parts: StackParts) -> RenderedPlan:
    marking = GpuNodeMarking.from_kyverno(parts.kyverno) if parts.kyverno is not None else None
    values = None
    crds = False
    if parts.operator is not None and parts.kyverno is not None and parts.monitoring is not None:
        crds = bool(registered_crds(parts.operator))
        driver_env, secret_env = driver_proxy(parts.proxy, parts.rke2) if parts.rke2 is not None else ({}, None)
        values = release_values(
            parts.operator,
            parts.kyverno,
            parts.monitoring,
            crds_registered=crds,
            driver_env=driver_env,
            repo_config=APT_SOURCES_CONFIGMAP if parts.apt_mirror is not None else None,
            cert_config=TRUSTED_CA_CONFIGMAP if parts.trusted_ca is not None else None,
            driver_secret_env=secret_env,
            driver_mounts_digest=mounts_digest(
                list(
                    driver_configmaps(
                        parts.apt_mirror,
                        parts.proxmox.guest_os if parts.proxmox is not None else None,
                        parts.trusted_ca,
                        parts.operator.namespace,
                    ).values()
                )
            ),
        )
    nodes: list[RenderedNode] = []
    # Where the Kyverno keys did not parse, the nodes are rendered with the default marking and the rules about
    # the marking (taint, label keys) stay silent: the Kyverno keys' own messages say what is wrong there.
    node_marking = marking or ARTICLE_MARKING
    for label, domain in parts.domains:
        agent = user_data = None
        if parts.rke2 is not None:
            agent = rke2_agent_config(domain, parts.rke2, TOKEN_PLACEHOLDER, node_marking)
            user_data = user_data_document(
                domain,
                parts.rke2,
                TOKEN_PLACEHOLDER,
                node_marking,
                parts.proxy,
                parts.registry_mirrors,
                apt_mirror=parts.apt_mirror,
                trusted_ca=parts.trusted_ca,
            )
        nodes.append(
            RenderedNode(
                label=label,
                domain=domain,
                # What the node will carry: the stack's labels, and the one the kubelet sets from its name.
                labels={**node_labels(domain, node_marking), HOSTNAME_LABEL: domain.hostname},
                taint=node_marking.taint,
                agent_config=agent,
                user_data=user_data,
            )
        )
    return RenderedPlan(parts=parts, values=values, crds_registered=crds, marking=marking, nodes=tuple(nodes))


# ----------------------------------------------------------------------------------------------- helpers


_get = value_at


def _extra(parts: StackParts, path: str) -> str | None:
    """The extraValues key that set `path` (or a map above or below it), if one did."""
    extra = parts.operator.extra_values if parts.operator is not None else {}
    for leaf, _ in leaf_paths(extra):
        if leaf == path or leaf.startswith(path + ".") or path.startswith(leaf + "."):
            return f"{NAMESPACE}:gpuOperator.extraValues.{leaf}"
    return None


def _source(parts: StackParts, path: str, typed: str) -> str:
    """The key to name for a rendered value: the extraValues key that set it, else the typed key behind it."""
    return _extra(parts, path) or f"{NAMESPACE}:{typed}"


def tolerates(toleration: Mapping[str, Any], taint: str) -> bool:
    """Kubernetes' ToleratesTaint (k8s.io/api core/v1 toleration.go): the effect matches (or is empty), the key
    matches (or is empty with Exists), and Exists takes any value while Equal (the default) needs the same one."""
    key, _, rest = taint.partition("=")
    value, _, effect = rest.rpartition(":")
    if toleration.get("effect") not in (None, "", effect):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration.get("key") != key:
        return False
    return operator == "Exists" or (operator == "Equal" and (toleration.get("value") or "") == value)


def _memory_below(limit: Any, floor: str) -> bool:
    return isinstance(limit, str) and parse_quantity(limit) < parse_quantity(floor)


# ----------------------------------------------------------------------------------------------- the rules


def _driver_build_memory(plan: RenderedPlan) -> list[str]:
    limit = _get(plan.values, "driver.resources.limits.memory")
    if not _memory_below(limit, DRIVER_BUILD_MEMORY):
        return []
    key = _source(plan.parts, "driver.resources.limits.memory", "gpuOperator.driverResources.limits.memory")
    return [
        f"{key}: the driver container's memory limit {limit} is below the {DRIVER_BUILD_MEMORY} its compile of the "
        "kernel module needs: it is OOM-killed mid-build, exit 137 (trap 1): set it to "
        f"{DRIVER_BUILD_MEMORY} or more, or leave it out (the default is {DRIVER_BUILD_MEMORY})"
    ]


def _dcgm_exporter_memory(plan: RenderedPlan) -> list[str]:
    limit = _get(plan.values, "dcgmExporter.resources.limits.memory")
    if not _memory_below(limit, DCGM_EXPORTER_MEMORY):
        return []
    key = _source(plan.parts, "dcgmExporter.resources.limits.memory", "gpuOperator.dcgmExporterResources.limits.memory")
    return [
        f"{key}: the DCGM exporter's memory limit {limit} is below the {DCGM_EXPORTER_MEMORY} it needs once its "
        "field set is loaded: it is OOM-killed right after 'DCGM successfully initialized!' (trap 13): set it to "
        f"{DCGM_EXPORTER_MEMORY} or more, or leave it out (the default is {DCGM_EXPORTER_MEMORY})"
    ]


def _operands_tolerate_the_taint(plan: RenderedPlan) -> list[str]:
    if plan.values is None or plan.marking is None:
        return []
    taint = plan.marking.taint
    problems = []
    lists = (
        ("daemonsets.tolerations", DAEMONSETS_DEFAULT_TOLERATIONS, "every operand (driver, toolkit, device plugin)"),
        ("node-feature-discovery.worker.tolerations", NFD_WORKER_DEFAULT_TOLERATIONS, "NFD's worker"),
    )
    for path, chart_default, who in lists:
        tolerations = _get(plan.values, path, list(chart_default))
        if isinstance(tolerations, list) and any(isinstance(t, Mapping) and tolerates(t, taint) for t in tolerations):
            continue
        key = _extra(plan.parts, path) or f"{NAMESPACE}:kyverno.taintKey"
        problems.append(
            f"{key}: {who} would not tolerate the taint the GPU nodes carry ({taint}), so it never runs there and "
            "nothing labels or advertises the cards (trap 11, 'Insufficient nvidia.com/gpu' with idle cards): "
            f"keep a toleration for {plan.marking.taint_key} with effect {plan.marking.taint_effect} in {path}"
        )
    return problems


def _nfd_master_tolerates_the_control_plane(plan: RenderedPlan) -> list[str]:
    path = "node-feature-discovery.master.tolerations"
    tolerations = _get(plan.values, path, list(NFD_MASTER_DEFAULT_TOLERATIONS))
    if plan.values is None or (isinstance(tolerations, list) and CONTROL_PLANE_TOLERATION in tolerations):
        return []
    return [
        f"{_source(plan.parts, path, 'gpuOperator.extraValues')}: NFD's master would lose its control-plane "
        "toleration and label no node (trap 11): leave node-feature-discovery.master.tolerations to gpu-pool"
    ]


def _kubelet_self_labels(plan: RenderedPlan) -> list[str]:
    if plan.marking is None:
        return []
    # The config.yaml's node-label list where RKE2's keys parsed, else the labels it would be written from.
    entries = [
        str(entry).partition("=")[0]
        for node in plan.nodes
        for entry in (
            node.agent_config.get("node-label", [])
            if node.agent_config is not None
            else registration_labels(node.domain, plan.marking)
        )
    ]
    refused = sorted({label for label in entries if not kubelet_may_self_label(label)})
    return [
        f"{NAMESPACE}:kyverno.gpuNodeLabelKey: {label!r} is in a kubernetes.io namespace a kubelet may not set on its "
        "own node, and RKE2 passes every node-label of its config.yaml to the kubelet as --node-labels: the kubelet "
        "refuses to start ('unknown kubernetes.io or k8s.io labels specified with --node-labels'): use a key outside "
        "kubernetes.io, e.g. nodepool, or one under node.kubernetes.io/"
        for label in refused
    ]


def _node_label_values(plan: RenderedPlan) -> list[str]:
    problems = []
    for node in plan.nodes:
        for label, value in node.labels.items():
            if len(value) <= LABEL_VALUE_MAX_LENGTH and _LABEL_VALUE.match(value):
                continue
            if label == HOSTNAME_LABEL:
                problems.append(
                    f"{node.key}.hostname: {value!r} is {len(value)} characters; it is the node name and the "
                    f"kubelet's {HOSTNAME_LABEL} label, whose value may have at most {LABEL_VALUE_MAX_LENGTH}: the "
                    f"node would never register: at most {LABEL_VALUE_MAX_LENGTH} characters"
                )
            else:
                problems.append(
                    f"{node.key}: the node label {label}={value!r} is not a valid label value (at most "
                    f"{LABEL_VALUE_MAX_LENGTH} letters, digits, '-', '_' or '.', alphanumeric at both ends)"
                )
    return problems


def _gpu_node_label_lands(plan: RenderedPlan) -> list[str]:
    """The label GPU pods are steered by must end up on every GPU node with its value, and be the stack's alone."""
    marking = plan.marking
    if marking is None:
        return []
    key = f"{NAMESPACE}:kyverno.gpuNodeLabelKey"
    owner = next((p for p in MANAGED_LABEL_PREFIXES if marking.label_key.startswith(p)), None)
    if owner is not None:
        return [
            f"{key}: {marking.label_key!r} is a label the GPU Operator, GPU Feature Discovery or NFD write themselves "
            f"({owner!r} is theirs): they would overwrite {marking.label_value!r} and the steering selector miss the "
            "node; use a key of your own, e.g. nodepool"
        ]
    for node in plan.nodes:
        if node.labels.get(marking.label_key) != marking.label_value:
            return [
                f"{key}: {marking.label_key!r} is also a label the stack or the kubelet sets on the node (there "
                f"{node.labels.get(marking.label_key)!r} for failureDomains[{node.label}]), so GPU pods steered to "
                f"{marking.label_key}={marking.label_value} would never find a node: use a key of your own, e.g. "
                "nodepool"
            ]
    return []


# The kubelet's default hard eviction threshold (memory.available<100Mi, Kubernetes "Node-pressure Eviction"): RKE2
# reserves nothing else by default, so a node's allocatable memory is its RAM less this.
EVICTION_HARD_MIB = 100


def _operands_fit_the_vm(plan: RenderedPlan) -> list[str]:
    """What the driver and DCGM exporter containers request must fit each GPU worker's memory, or they stay
    Pending there and the node never advertises a GPU."""
    requests = {
        "gpuOperator.driverResources.requests.memory": _get(plan.values, "driver.resources.requests.memory"),
        "gpuOperator.dcgmExporterResources.requests.memory": _get(
            plan.values, "dcgmExporter.resources.requests.memory"
        ),
    }
    asked = {key: parse_quantity(v) for key, v in requests.items() if isinstance(v, str)}
    if not asked:
        return []
    total_mib = sum(asked.values()) / (1 << 20)
    problems = []
    for node in plan.nodes:
        room = node.domain.memory_mib - EVICTION_HARD_MIB
        if total_mib > room:
            keys = " and ".join(f"{NAMESPACE}:{k}" for k in asked)
            problems.append(
                f"{keys}: the driver and DCGM exporter request {total_mib:.0f} MiB together, more than "
                f"failureDomains[{node.label}]'s VM has for pods ({room} MiB of memoryMiB {node.domain.memory_mib}): "
                "they would stay Pending and the node never advertise a GPU: request less, or give the VM more "
                "memoryMiB"
            )
    return problems


def _toolkit_reaches_rke2_containerd(plan: RenderedPlan) -> list[str]:
    env = _get(plan.values, "toolkit.env")
    wanted = [{"name": "CONTAINERD_SOCKET", "value": RKE2_CONTAINERD_SOCKET}]
    if plan.values is None or env == wanted:
        return []
    key = _source(plan.parts, "toolkit.env", "gpuOperator.toolkit.containerdSocket")
    return [
        f"{key}: the toolkit's env must be CONTAINERD_SOCKET={RKE2_CONTAINERD_SOCKET} alone, RKE2's own containerd "
        "(trap 6, 'no runtime for \"nvidia\" is configured'): leave toolkit.env to gpu-pool"
    ]


def _cdi_injects_devices(plan: RenderedPlan) -> list[str]:
    if plan.values is None:
        return []
    if _get(plan.values, "cdi.enabled") is True and _get(plan.values, "cdi.nriPluginEnabled") is False:
        return []
    return [
        f"{_source(plan.parts, 'cdi', 'gpuOperator.extraValues')}: CDI must be on and its NRI plugin off (traps 7 "
        "and 10: without CDI a patched containerd config RKE2 regenerates away; NRI needs containerd 2.1)"
    ]


def _runtime_class_rke2_registers(plan: RenderedPlan) -> list[str]:
    runtime = _get(plan.values, "operator.runtimeClass")
    if plan.values is None or runtime in RKE2_NVIDIA_RUNTIMES:
        return []
    return [
        f"{_source(plan.parts, 'operator.runtimeClass', 'gpuOperator.extraValues')}: RuntimeClass {runtime!r} names a "
        f"handler RKE2 does not register ({', '.join(RKE2_NVIDIA_RUNTIMES)}) (trap 6)"
    ]


def _driver_built_from_source(plan: RenderedPlan) -> list[str]:
    version = str(_get(plan.values, "driver.version", ""))
    if plan.values is None or _get(plan.values, "driver.usePrecompiled") is not True or version.isdigit():
        return []
    return [
        f"{_source(plan.parts, 'driver.usePrecompiled', 'gpuOperator.usePrecompiled')}: precompiled drivers are "
        f"published per branch and kernel, so {version} has none (trap 2, 'distro not supported'): build from "
        "source (usePrecompiled false) or pin a branch"
    ]


def _driver_supported(plan: RenderedPlan) -> list[str]:
    operator = plan.parts.operator
    if plan.values is None or operator is None or operator.allow_unsupported_driver:
        return []
    version = str(_get(plan.values, "driver.version", ""))
    problem = driver_problem(operator.chart_version, version)
    if problem is None and version == operator.driver_version:
        return []
    key = _source(plan.parts, "driver.version", "gpuOperator.driverVersion")
    return [f"{key}: {problem or f'the release would pin {version}, not driverVersion {operator.driver_version}'}"]


def _operands_enabled(plan: RenderedPlan) -> list[str]:
    """The plan relies on the operator's own driver, toolkit and device plugin (cloud-init installs none), and on
    its DCGM exporter where the alerts and dashboard read it."""
    if plan.values is None:
        return []
    needed = ["driver", "toolkit", "devicePlugin"]
    monitoring = plan.parts.monitoring
    if monitoring is not None and monitoring.service_monitor:
        needed.append("dcgmExporter")
    return [
        f"{_source(plan.parts, f'{section}.enabled', 'gpuOperator.extraValues')}: the plan needs the operator's "
        f"{section} (the VMs get no NVIDIA software of their own, and the GPU-ready gate and the alerts wait on it): "
        f"remove {section}.enabled: false"
        for section in needed
        if _get(plan.values, f"{section}.enabled", True) is False
    ]


def _time_slicing_config_exists(plan: RenderedPlan) -> list[str]:
    problems = []
    config = _get(plan.values, "devicePlugin.config")
    if plan.values is not None and config != {
        "create": False,
        "name": TIME_SLICING_CONFIGMAP,
        "default": "",
    }:
        problems.append(
            f"{_source(plan.parts, 'devicePlugin.config', 'gpuOperator.extraValues')}: the device plugin must read "
            f"gpu-pool's ConfigMap {TIME_SLICING_CONFIGMAP}, created before the release (a missing one takes a card "
            "from 1 schedulable GPU to 0)"
        )
    profiles = plan.parts.profiles
    if profiles is None or not all(_LABEL_VALUE.match(name) for name in profiles):
        return problems  # a profile name that is no label value has its own message
    keys = set(build_time_slicing_config(profiles))
    for node in plan.nodes:
        profile = node.labels.get(DEVICE_PLUGIN_CONFIG_LABEL)
        # A `sharing` that names no profile at all is the cross-key rule's to report (config/cross_key.py); what is
        # left is the rendered ConfigMap and the rendered label disagreeing.
        if profile not in keys and profile in profiles and plan.parts.known(node.label, "sharing"):
            problems.append(
                f"{node.key}.sharing: the node label {DEVICE_PLUGIN_CONFIG_LABEL}={profile} names no key of the "
                f"time-slicing ConfigMap ({', '.join(sorted(keys))}): the card drops from 1 schedulable GPU to 0"
            )
    return problems


def _one_crd_owner(plan: RenderedPlan) -> list[str]:
    upgrade = _get(plan.values, "operator.upgradeCRD")
    if plan.values is None or upgrade is (not plan.crds_registered):
        return []
    return [
        f"{_source(plan.parts, 'operator.upgradeCRD', 'gpuOperator.chart')}: the chart's CRD hook must run exactly "
        "when gpu-pool does not register the CRDs itself (a chart on disk): two owners fight, none leaves a stale "
        "CRD that prunes what the new operator reads"
    ]


def _dcgm_metrics_follow_the_csv(plan: RenderedPlan) -> list[str]:
    if plan.values is None:
        return []
    digest = _get(plan.values, f"dcgmExporter.annotations.{DCGM_METRICS_DIGEST_ANNOTATION}")
    name = _get(plan.values, "dcgmExporter.config.name")
    version = deployed_exporter_version(plan.parts.operator) if plan.parts.operator is not None else ""
    if digest == metrics_digest(build_dcgm_metrics_csv(version)) and name == DCGM_METRICS_CONFIGMAP:
        return []
    return [
        f"{_source(plan.parts, 'dcgmExporter', 'gpuOperator.extraValues')}: the exporter must read gpu-pool's "
        f"{DCGM_METRICS_CONFIGMAP} and carry its digest, or the dashboard and alerts query metrics it never emits"
    ]


def _steps(node: RenderedNode) -> dict[str, tuple[str, str]]:
    """The first boot's steps as the rendered runcmd runs them: name -> (kind, command)."""
    return step_commands((node.user_data or {}).get("runcmd", []))


def _commands(node: RenderedNode) -> list[str]:
    return [command for _, command in _steps(node).values()]


def _written(node: RenderedNode, path: str) -> str | None:
    for entry in (node.user_data or {}).get("write_files", []):
        if entry.get("path") == path:
            return str(entry.get("content", ""))
    return None


def _kernel_held(plan: RenderedPlan) -> list[str]:
    problems = []
    for node in plan.nodes:
        if node.user_data is None:
            continue
        holds = [line for line in _commands(node) if line.startswith("apt-mark hold")]
        held = set(holds[0].split()[2:]) if holds else set()
        blacklist = _written(node, "/etc/apt/apt.conf.d/51gpu-pool-no-kernel-upgrades") or ""
        if not set(HELD_KERNEL_PACKAGES) <= held or '"linux-"' not in blacklist:
            problems.append(
                f"{node.key}: the VM's cloud-init must hold the kernel (apt-mark hold and the unattended-upgrades "
                "blacklist), or a kernel upgrade strands the driver ('Unknown symbol', trap 3)"
            )
    return problems


def _nouveau_kept_out(plan: RenderedPlan) -> list[str]:
    problems = []
    for node in plan.nodes:
        if node.user_data is None:
            continue
        blacklist = _written(node, "/etc/modprobe.d/blacklist-nouveau.conf") or ""
        if "blacklist nouveau" not in blacklist or "update-initramfs -u" not in _commands(node):
            problems.append(
                f"{node.key}: the VM's cloud-init must blacklist nouveau (and rebuild the initramfs): the driver "
                "container cannot load beside it"
            )
    return problems


def _containerd_2(plan: RenderedPlan) -> list[str]:
    problems = []
    for node in plan.nodes:
        for line in _commands(node):
            match = re.search(r'INSTALL_RKE2_VERSION="(?P<version>[^"]+)"', line)
            problem = containerd_problem(match["version"]) if match else None
            if problem:
                # The very words of rke2.version's own check, so the two never both speak for one mistake.
                problems.append(f"{NAMESPACE}:rke2.version: {match['version'] if match else ''} {problem}")
    return list(dict.fromkeys(problems))


def _taint_at_registration(plan: RenderedPlan) -> list[str]:
    if plan.marking is None:
        return []
    return [
        f"{node.key}: RKE2 must register the node with the GPU taint {node.taint} (its config.yaml has "
        f"{node.agent_config.get('node-taint')}), so no pod lands before the taint step"
        for node in plan.nodes
        if node.agent_config is not None and node.agent_config.get("node-taint") != [node.taint]
    ]


def _node_name_and_labels_registered(plan: RenderedPlan) -> list[str]:
    problems = []
    for node in plan.nodes:
        if node.agent_config is None or plan.marking is None:
            continue
        wanted = [f"{k}={v}" for k, v in sorted(registration_labels(node.domain, plan.marking).items())]
        if node.agent_config.get("node-name") != node.domain.hostname or node.agent_config.get("node-label") != wanted:
            problems.append(
                f"{node.key}: RKE2 must register the node as {node.domain.hostname} with the labels {wanted}, which "
                "the steering policy and the alerts select it by"
            )
    return problems


RULES: tuple[Rule, ...] = (
    Rule(
        "driver-build-memory",
        "1",
        f"the driver container's memory limit is unset or at least {DRIVER_BUILD_MEMORY}",
        ("gpuOperator.driverResources.limits.memory", "gpuOperator.extraValues.driver.resources"),
        _driver_build_memory,
    ),
    Rule(
        "driver-built-from-source",
        "2",
        "precompiled drivers only with a branch pin; otherwise the driver is built from source",
        ("gpuOperator.usePrecompiled", "gpuOperator.extraValues.driver.usePrecompiled"),
        _driver_built_from_source,
    ),
    Rule(
        "kernel-held",
        "3",
        "every VM's cloud-init holds the kernel packages and blacklists kernel upgrades",
        (),
        _kernel_held,
    ),
    Rule(
        "driver-supported",
        "5",
        "the release pins driverVersion, one the chart supports",
        ("gpuOperator.driverVersion", "gpuOperator.extraValues.driver.version"),
        _driver_supported,
    ),
    Rule(
        "toolkit-reaches-rke2-containerd",
        "6",
        f"the toolkit's env is CONTAINERD_SOCKET={RKE2_CONTAINERD_SOCKET} alone",
        ("gpuOperator.toolkit.containerdSocket", "gpuOperator.extraValues.toolkit.env"),
        _toolkit_reaches_rke2_containerd,
    ),
    Rule(
        "runtime-class-rke2-registers",
        "6",
        "the operator's RuntimeClass names a handler RKE2 registers",
        ("gpuOperator.extraValues.operator.runtimeClass",),
        _runtime_class_rke2_registers,
    ),
    Rule(
        "cdi-injects-devices",
        "7, 10",
        "CDI is on and its NRI plugin off",
        ("gpuOperator.extraValues.cdi.enabled", "gpuOperator.extraValues.cdi.nriPluginEnabled"),
        _cdi_injects_devices,
    ),
    Rule(
        "containerd-2",
        "9",
        "the RKE2 release every VM installs ships containerd 2.0",
        ("rke2.version",),
        _containerd_2,
    ),
    Rule(
        "operands-tolerate-the-gpu-taint",
        "11",
        "every operand and NFD's worker tolerate the taint the GPU nodes really carry",
        (
            "kyverno.taintKey",
            "kyverno.taintEffect",
            "gpuOperator.extraValues.node-feature-discovery.worker.tolerations",
            "gpuOperator.extraValues.daemonsets.tolerations",
        ),
        _operands_tolerate_the_taint,
    ),
    Rule(
        "nfd-master-tolerates-the-control-plane",
        "11",
        "NFD's master tolerates the control-plane taint",
        ("gpuOperator.extraValues.node-feature-discovery.master.tolerations",),
        _nfd_master_tolerates_the_control_plane,
    ),
    Rule(
        "dcgm-exporter-memory",
        "13",
        f"the DCGM exporter's memory limit is unset or at least {DCGM_EXPORTER_MEMORY}",
        ("gpuOperator.dcgmExporterResources.limits.memory", "gpuOperator.extraValues.dcgmExporter.resources"),
        _dcgm_exporter_memory,
    ),
    Rule(
        "nouveau-kept-out",
        "nouveau",
        "every VM's cloud-init blacklists nouveau and rebuilds the initramfs",
        (),
        _nouveau_kept_out,
    ),
    Rule(
        "time-slicing-config-exists",
        "time-slicing",
        "the device plugin reads gpu-pool's ConfigMap, and every node's profile label names one of its keys",
        ("failureDomains[].sharing", "gpuOperator.extraValues.devicePlugin.config"),
        _time_slicing_config_exists,
    ),
    Rule(
        "gpu-taint-at-registration",
        "taint",
        "RKE2 registers every node with the GPU taint the tolerations are for",
        (),
        _taint_at_registration,
    ),
    Rule(
        "node-registered-with-its-labels",
        "taint",
        "RKE2 registers every node under its hostname with the labels GPU pods are steered by",
        (),
        _node_name_and_labels_registered,
    ),
    Rule(
        "kubelet-self-labels",
        "field review 4",
        "every label RKE2 passes to the kubelet is one a kubelet may set on its own node",
        ("kyverno.gpuNodeLabelKey",),
        _kubelet_self_labels,
    ),
    Rule(
        "gpu-node-label-lands",
        "steering",
        "the label GPU pods are steered by lands on every GPU node with its value, and nothing else writes it",
        ("kyverno.gpuNodeLabelKey",),
        _gpu_node_label_lands,
    ),
    Rule(
        "operands-fit-the-vm",
        "1",
        "what the driver and DCGM exporter request fits every GPU worker's memory",
        (
            "gpuOperator.driverResources.requests.memory",
            "gpuOperator.dcgmExporterResources.requests.memory",
            "failureDomains[].memoryMiB",
        ),
        _operands_fit_the_vm,
    ),
    Rule(
        "node-label-values",
        "field review 4",
        f"every label value a node carries (its hostname too) is a label value of at most {LABEL_VALUE_MAX_LENGTH}",
        ("failureDomains[].hostname",),
        _node_label_values,
    ),
    Rule(
        "one-crd-owner",
        "Helm never upgrades crds/",
        "the chart's CRD hook runs exactly when gpu-pool does not register the CRDs itself",
        ("gpuOperator.extraValues.operator.upgradeCRD",),
        _one_crd_owner,
    ),
    Rule(
        "dcgm-metrics-follow-the-csv",
        "field review",
        "the DCGM exporter reads gpu-pool's metrics ConfigMap and carries its digest",
        ("gpuOperator.extraValues.dcgmExporter.config", "gpuOperator.extraValues.dcgmExporter.annotations"),
        _dcgm_metrics_follow_the_csv,
    ),
    Rule(
        "operands-enabled",
        "field review 4",
        "the operator's driver, toolkit and device plugin are on, and its DCGM exporter where monitoring reads it",
        (
            "gpuOperator.extraValues.driver.enabled",
            "gpuOperator.extraValues.toolkit.enabled",
            "gpuOperator.extraValues.devicePlugin.enabled",
            "gpuOperator.extraValues.dcgmExporter.enabled",
        ),
        _operands_enabled,
    ),
)
RULE_IDS: tuple[str, ...] = tuple(rule.id for rule in RULES)


def violations(plan: RenderedPlan) -> Iterator[tuple[Rule, str]]:
    for rule in RULES:
        for message in rule.check(plan):
            yield rule, message


def rendered_problems(parts: StackParts) -> list[str]:
    """Every rule broken by what this config renders, one message each naming the key that did it; with
    `airGapped`, each thing the nodes or the cluster would fetch that no lab copy serves (components/air_gap.py)."""
    plan = render(parts)
    messages = [message for _, message in violations(plan)] + air_gap_problems(plan.parts, plan.values)
    return list(dict.fromkeys(messages))


def stack_inventory(cfg: StackConfig) -> list[Fetched]:
    """What the nodes and the cluster fetch for a validated stack, from what it renders (components/air_gap.py)."""
    plan = render(parts_of(cfg))
    return inventory(plan.parts, plan.values)


def rule(rule_id: str) -> Rule:
    return next(r for r in RULES if r.id == rule_id)


def rules_for(keys: Sequence[str]) -> list[Rule]:
    return [r for r in RULES if set(r.keys) & set(keys)]
