"""Rules no single key can check, run on whatever parts of the stack config parse, so that a stack with a
single-key mistake still hears about its cross-key ones in the same run."""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from config.card_driver import card_driver_problems, smoke_image_problems
from config.earlier_file import waived
from config.failure_domain import FailureDomainConfig
from config.lab_rules import LAB_RULES, lab_warnings
from config.operator_schema import dropped_false_warnings, image_problems_of, schema_problems_of
from config.rke2 import RKE2_VERSION
from config.sharing import SharingProfile
from config.stack import StackConfig
from config.stack_parts import StackParts, parts_of
from config.validators import LABEL_VALUE
from knowledge.driver_matrix import chart_deprecation
from knowledge.gpu_operator import DCGM_EXPORTER_APP, GPU_RESOURCE, NFD_NVIDIA_PCI_LABEL
from knowledge.rke2 import GPU_OPERATOR_RKE2_MINORS, RKE2_LINE_CONTAINERD

DEFAULT_SSH_PORT = 22


def _duplicates(parts: StackParts, attr: str, what: str, why: str) -> list[str]:
    known = [(label, domain) for label, domain in parts.domains if parts.known(label, attr)]
    counts = Counter(getattr(domain, attr) for _, domain in known)
    problems: list[str] = []
    seen: dict[Any, str] = {}
    alias = FailureDomainConfig.model_fields[attr].alias or attr
    for label, domain in known:
        value = getattr(domain, attr)
        if counts[value] > 1 and value in seen:
            problems.append(
                f"gpu-pool:failureDomains[{label}].{alias}: {value!r} is already used by "
                f"failureDomains[{seen[value]}]; {what} must be unique{why}"
            )
        seen.setdefault(value, label)
    return problems


def _card_problems(where: str, domain: FailureDomainConfig, profiles: Mapping[str, SharingProfile] | None) -> list[str]:
    """Several cards in one domain: each card once, and one model unless every slot is a whole card."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, card in enumerate(domain.cards):
        slot = card.pci_address.split(".")[0]
        if slot in seen:
            problems.append(
                f"{where}.{domain.card_key(index)}.pciAddress: {card.pci_address!r} is the card already listed as "
                f"{domain.card_key(seen[slot])}; Proxmox passes a card to a VM once (list each card once, its "
                "functions come with it)"
            )
        seen.setdefault(slot, index)
    models = sorted({card.vendor_device_id for card in domain.cards})
    profile = profiles.get(domain.sharing) if profiles is not None else None
    if len(models) > 1 and profile is not None and profile.replicas > 1:
        problems.append(
            f"{where}.gpus: mixed models ({', '.join(models)}) under sharing profile {domain.sharing!r} "
            f"({profile.replicas} slots per card): the device plugin advertises every slot as one "
            "nvidia.com/gpu, so a pod cannot tell a slice of the small card from one of the large; put cards of "
            "one model in a domain, or give it a profile with replicas: 1 (whole cards)"
        )
    return problems


def _domains(parts: StackParts, *needs: str) -> Iterator[tuple[str, str, FailureDomainConfig]]:
    """Each domain whose `needs` parsed, with its label and its key prefix for messages."""
    for label, domain in parts.domains:
        if all(parts.known(label, attr) for attr in needs):
            yield label, f"gpu-pool:failureDomains[{label}]", domain


def _sharing_defined(parts: StackParts) -> list[str]:
    if parts.profiles is None:
        return []
    defined = ", ".join(sorted(parts.profiles))
    return [
        f"{where}.sharing: {domain.sharing!r} is not a defined sharing profile "
        f"(defined in gpu-pool:sharingProfiles: {defined}); a node label naming a missing profile "
        "takes that card from 1 schedulable GPU to 0"
        for _, where, domain in _domains(parts, "sharing")
        if domain.sharing not in parts.profiles
    ]


def _kernel_needs_a_key(parts: StackParts) -> list[str]:
    problems = []
    for _, where, domain in _domains(parts, "ssh_authorized_keys"):
        if domain.kernel is None or domain.ssh_authorized_keys:
            continue
        no_key = (
            f"{where}.kernel: the kernel upgrade logs in to the VM over SSH as {domain.username!r}, but the "
            "domain has no sshAuthorizedKeys: add the public key whose private half is in your ssh-agent or "
            "in the secret gpu-pool:sshPrivateKey"
        )
        if not waived(no_key):
            problems.append(no_key)
    return problems


def _ssh_port_needs_an_address(parts: StackParts) -> list[str]:
    proxmox = parts.proxmox
    if proxmox is None or proxmox.ssh.port == DEFAULT_SSH_PORT:
        return []
    # bpg takes a port only in an ssh.node {name, address, port} entry; nodes it finds on its own (the API's
    # address for the node) get port 22 (proxmoxtf/provider/provider.go apiResolver, v0.111.1).
    return [
        f"{where}.proxmoxNode: gpu-pool:proxmox.ssh.port is {proxmox.ssh.port}, but node "
        f"{domain.proxmox_node!r} has no address in gpu-pool:proxmox.ssh.nodeAddresses, so the provider "
        f"would upload its snippet to port 22: add `{domain.proxmox_node}: <its address>` there"
        for _, where, domain in _domains(parts, "proxmox_node")
        if domain.proxmox_node not in proxmox.ssh.node_addresses
    ]


def _cards_of_a_domain(parts: StackParts) -> list[str]:
    return [
        problem
        for _, where, domain in _domains(parts, "cards", "sharing")
        for problem in _card_problems(where, domain, parts.profiles)
    ]


def _cards_the_driver_drives(parts: StackParts) -> list[str]:
    return [
        problem
        for _, where, domain in _domains(parts, "cards")
        for problem in card_driver_problems(where, domain, parts.operator)
    ]


def _raw_passthrough_needs_root(parts: StackParts) -> list[str]:
    if parts.proxmox is None or parts.proxmox.auth == "rootPassword":
        return []
    problems = []
    for _, where, domain in _domains(parts, "cards"):
        raw_keys = [domain.card_key(i) for i, card in enumerate(domain.cards) if card.passthrough == "raw"]
        if raw_keys:
            problems.append(
                f"{where}.{raw_keys[0]}.passthrough: 'raw' assigns a raw PCI id, which Proxmox only allows root@pam "
                "to do (an API token fails with an unhelpful error); use 'mapping', or set gpu-pool:proxmox.auth to "
                "rootPassword"
            )
    return problems


def _profile_names_are_label_values(parts: StackParts) -> list[str]:
    return [
        f"gpu-pool:sharingProfiles.{name}: the profile name is also the value of the node label "
        "nvidia.com/device-plugin.config: at most 63 letters, digits, '-', '_' or '.', starting and "
        "ending with a letter or digit"
        for name in parts.profiles or {}
        if not name or not LABEL_VALUE.match(name)
    ]


def _gpu_resource_advertised(parts: StackParts) -> list[str]:
    if parts.kyverno is None or parts.kyverno.gpu_resource == GPU_RESOURCE:
        return []
    return [
        f"gpu-pool:kyverno.gpuResource: {parts.kyverno.gpu_resource!r} is not what the device plugin advertises "
        f"({GPU_RESOURCE}; the time-slicing profiles keep renameByDefault false), so the policy "
        "would never see a GPU pod"
    ]


def _smoke_test_steered(parts: StackParts) -> list[str]:
    """With Kyverno on, the smoke Job carries no GPU toleration of its own: the policy must add it (the test proves
    the mutation too), so the smoke namespace must not be one the policy leaves alone."""
    kyverno, smoke = parts.kyverno, parts.smoke
    if kyverno is None or smoke is None or not kyverno.enabled or not smoke.enabled:
        return []
    if smoke.namespace not in kyverno.excluded_namespaces:
        return []
    return [
        f"gpu-pool:kyverno.excludedNamespaces: {smoke.namespace!r} is the smoke test's namespace, and its Job relies "
        "on the policy for its GPU toleration and node rule: excluded, it would stay Pending on every node and fail "
        f"`up`: remove {smoke.namespace} from the list"
    ]


def _no_quota_where_gpu_pool_asks_for_gpus(parts: StackParts) -> list[str]:
    """The operator's validator starts a pod asking one nvidia.com/gpu in the operator's namespace on every node
    (gpu-operator v26.7.0 cmd/nvidia-validator/main.go, plugin validation), and every domain's smoke Job asks one in
    the smoke namespace at the same time: a GPU quota there keeps them Pending, and the operator never ready."""
    if parts.quotas is None:
        return []
    ours: dict[str, str] = {}
    if parts.operator_namespace is not None:
        ours[parts.operator_namespace] = "the operator's validator starts a pod asking a GPU there on every node"
    if parts.smoke is not None and parts.smoke.enabled:
        ours[parts.smoke.namespace] = "every domain's smoke Job asks a GPU there, all at once"
    return [
        f"gpu-pool:gpuQuotas.namespaces.{namespace}: {why}, and a GPU quota would keep them Pending: leave "
        f"{namespace} without one"
        for namespace, why in ours.items()
        if namespace in parts.quotas.namespaces
    ]


def _exporter_job_is_the_service_monitors(parts: StackParts) -> list[str]:
    """With the operator's ServiceMonitor, the exporter's `job` is its Service's app label (jobLabel: app), so an
    alert on another job never sees the exporter: DcgmExporterDown fires while it runs."""
    monitoring, operator = parts.monitoring, parts.operator
    if monitoring is None or operator is None or not monitoring.service_monitor:
        return []
    if monitoring.dcgm_exporter_job == DCGM_EXPORTER_APP:
        return []
    exporter = operator.extra_values.get("dcgmExporter")
    monitor = exporter.get("serviceMonitor") if isinstance(exporter, Mapping) else None
    if isinstance(monitor, Mapping) and monitor.get("relabelings"):
        return []  # relabelings may rename the job: the user's own
    return [
        f"gpu-pool:monitoring.dcgmExporterJob: {monitoring.dcgm_exporter_job!r} is not the job the operator's "
        f"ServiceMonitor gives the exporter ({DCGM_EXPORTER_APP}, from its jobLabel: app), so the GPU alerts and "
        "the dashboard would see no exporter: leave it out, or rename the job with relabelings in "
        "gpuOperator.extraValues.dcgmExporter.serviceMonitor"
    ]


def _reclaim_reads_the_card_rules(parts: StackParts) -> list[str]:
    """The notebook reclaim policy judges idleness from the per-card recording rules, which ship in the GPU
    PrometheusRule (monitoring.alertsEnabled): without them every card's series is missing, so every notebook is
    "unknown" and the policy would run, holding its patch right on Notebooks, and never stop one."""
    reclaim, monitoring = parts.reclaim, parts.monitoring
    if reclaim is None or monitoring is None or not reclaim.idle_notebooks.enabled or monitoring.alerts_enabled:
        return []
    return [
        "gpu-pool:reclaim.idleNotebooks.enabled: the policy reads the per-card utilisation gpu-pool records in its "
        "GPU PrometheusRule, which gpu-pool:monitoring.alertsEnabled false does not ship: set "
        "monitoring.alertsEnabled to true, or reclaim.idleNotebooks.enabled to false"
    ]


def _smoke_test_restricted(parts: StackParts) -> list[str]:
    if parts.smoke_namespace is None or parts.smoke_namespace != parts.operator_namespace:
        return []
    return [
        f"gpu-pool:smokeTest.namespace: {parts.operator_namespace!r} is the operator's privileged namespace; "
        "the smoke test must prove a GPU pod works under the restricted Pod Security Standard"
    ]


CrossKeyRule = Callable[[StackParts], list[str]]


def cross_key_problems(parts: StackParts) -> list[str]:
    """Every rule across keys (CROSS_KEY_RULES), in order; each message names the key path of the offending entry
    (a domain by its name)."""
    return [problem for _, rule in CROSS_KEY_RULES for problem in rule(parts)]


def _address_problems(parts: StackParts) -> list[str]:
    """Static addresses across domains: two VMs with one address both lose their traffic (ARP decides per packet),
    and a VM on another domain's gateway takes the subnet's route away; the Proxmox nodes' own addresses too."""
    problems: list[str] = []
    owners: dict[ipaddress.IPv4Address, str] = {}
    gateways: dict[ipaddress.IPv4Address, str] = {}
    statics = [
        (label, domain)
        for label, domain in parts.domains
        if parts.known(label, "network") and domain.network.ipv4 != "dhcp"
    ]
    for label, domain in statics:
        if domain.network.gateway is not None:
            gateways.setdefault(ipaddress.IPv4Address(domain.network.gateway), label)
    nodes: dict[ipaddress.IPv4Address, str] = {}
    if parts.proxmox is not None:
        for node, address in parts.proxmox.ssh.node_addresses.items():
            try:
                nodes[ipaddress.IPv4Address(address)] = node
            except ValueError:
                continue  # a host name: nothing to compare
    for label, domain in statics:
        ip = ipaddress.IPv4Interface(domain.network.ipv4).ip
        key = f"gpu-pool:failureDomains[{label}].network.ipv4"
        if ip in owners:
            problems.append(
                f"{key}: {ip} is already failureDomains[{owners[ip]}]'s address; two VMs with one address "
                "both lose traffic: give each VM its own"
            )
        elif ip in gateways and gateways[ip] != label:
            problems.append(
                f"{key}: {ip} is failureDomains[{gateways[ip]}]'s gateway: the VM would take the router's "
                "address and cut that subnet off: give the VM a free address"
            )
        elif ip in nodes:
            problems.append(
                f"{key}: {ip} is the Proxmox node {nodes[ip]}'s address "
                "(gpu-pool:proxmox.ssh.nodeAddresses): give the VM a free address"
            )
        owners.setdefault(ip, label)
    return problems


def _rollout_order(parts: StackParts) -> list[str]:
    if parts.rollout is None:
        return []
    if any(not parts.known(label, "name") for label, _ in parts.domains):
        return []  # a domain whose name did not parse: which names exist cannot be told
    names = [domain.name for _, domain in parts.domains]
    problems: list[str] = []
    for name, count in Counter(parts.rollout.order or []).items():
        if count > 1:
            problems.append(
                f"gpu-pool:rollout.order: {name!r} is listed {count} times; a wave goes through each domain once: "
                "list it once"
            )
        if parts.domains and name not in names:
            problems.append(
                f"gpu-pool:rollout.order: {name!r} is not a failure domain (the domains are {', '.join(names)}): "
                "name domains by their name, or drop it"
            )
    return problems


def _release_key(version: str) -> tuple[int, ...]:
    """`v1.33.13+rke2r2` -> (1, 33, 13, 2), for ordering releases of one line."""
    core, _, build = version.removeprefix("v").partition("+rke2r")
    return (*map(int, core.split(".")), int(build or 0))


def _patch_warnings(version: str, minor: tuple[int, int]) -> list[str]:
    """A release newer than the newest gpu-pool knows on its line: it may have come out since (a warning, not a
    refusal), or it is a typo for a patch that does not exist, which the node's installer finds only at first boot
    (curl gets a 404 and cloud-init stops)."""
    newest = RKE2_LINE_CONTAINERD[minor][2]
    if _release_key(version) <= _release_key(newest):
        return []
    return [
        f"gpu-pool:rke2.version: {version} is newer than the newest v{minor[0]}.{minor[1]} release gpu-pool knows "
        f"({newest}, knowledge/rke2.py): if https://github.com/rancher/rke2/releases/tag/{version.replace('+', '%2B')} "
        "exists, the pin works (pin what the servers run); if not, it is a typo, and every new VM's install would "
        "fail at first boot"
    ]


def rke2_line_warnings(version: str) -> list[str]:
    """An RKE2 line newer than any gpu-pool knows: accepted (every line from v1.33 ships containerd 2), but said."""
    match = RKE2_VERSION.match(version)
    if not match:
        return []
    minor = (int(match[1]), int(match[2]))
    newest_line = max(RKE2_LINE_CONTAINERD)
    lowest, highest = GPU_OPERATOR_RKE2_MINORS
    if minor in RKE2_LINE_CONTAINERD:
        return _patch_warnings(version, minor)
    if minor <= newest_line:
        return []
    first, first_containerd, newest, newest_containerd = RKE2_LINE_CONTAINERD[newest_line]
    return [
        f"gpu-pool:rke2.version: {version} is on a line newer than any gpu-pool knows (the newest, "
        f"v{newest_line[0]}.{newest_line[1]}, ships containerd {first_containerd} in {first} to {newest_containerd} "
        f"in {newest}) and outside the RKE2 {lowest[0]}.{lowest[1]} to {highest[0]}.{highest[1]} the GPU Operator "
        "26.7 line is tested on (its platform support page): check the release's containerd is 2.x and that NVIDIA "
        "supports it before a wave rolls it"
    ]


def _rollout_max_unavailable(parts: StackParts) -> list[str]:
    if parts.rollout is None or not parts.domains or parts.rollout.max_unavailable <= len(parts.domains):
        return []
    return [
        f"gpu-pool:rollout.maxUnavailable: {parts.rollout.max_unavailable} is more than the "
        f"{len(parts.domains)} failure domains: at most {len(parts.domains)} (1 keeps all but one serving)"
    ]


# The kernel lines each Ubuntu release's archive serves (Ubuntu kernel release cycle: jammy GA 5.15, its last HWE
# 6.8; noble GA 6.8; resolute's GA 6.17 and up): a pin outside them is a package `apt-get install` cannot find,
# which the kernel wave learns only after the drain. A newer HWE line is the archive's to add, so only the floor
# (and jammy's closed ceiling) is judged.
KERNEL_LINES: Mapping[str, tuple[tuple[int, int], tuple[int, int] | None]] = {
    "ubuntu-22.04": ((5, 15), (6, 8)),
    "ubuntu-24.04": ((6, 8), None),
    "ubuntu-26.04": ((6, 17), None),
}


def _kernel_of_the_guest_release(parts: StackParts) -> list[str]:
    guest = parts.proxmox.guest_os if parts.proxmox is not None else None
    if guest is None or guest not in KERNEL_LINES:
        return []
    lowest, highest = KERNEL_LINES[guest]
    problems = []
    for _, where, domain in _domains(parts, "kernel"):
        if domain.kernel is None:
            continue
        line = tuple(int(part) for part in domain.kernel.split("-", 1)[0].split(".")[:2])
        if line < lowest or (highest is not None and line > highest):
            span = f"{lowest[0]}.{lowest[1]}" + (f" to {highest[0]}.{highest[1]}" if highest else " and later")
            problems.append(
                f"{where}.kernel: {domain.kernel} is a {line[0]}.{line[1]} kernel, and {guest}'s archive serves "
                f"{span} (gpu-pool:proxmox.guestOs): the kernel wave would find no such package after draining "
                "the node; pin one of its releases (apt-cache search linux-image- on the VM)"
            )
    return problems


def _extra_values_schema(parts: StackParts) -> list[str]:
    operator = parts.operator
    return schema_problems_of(operator.extra_values, operator.chart_version) if operator is not None else []


def _extra_values_images(parts: StackParts) -> list[str]:
    operator = parts.operator
    return image_problems_of(operator.extra_values, operator.chart_version) if operator is not None else []


# Every rule across keys, by the id docs/validation.md lists it under (a test keeps the two in step).
CROSS_KEY_RULES: tuple[tuple[str, CrossKeyRule], ...] = (
    ("unique-domain-names", lambda p: _duplicates(p, "name", "domain names", "")),
    ("unique-hostnames", lambda p: _duplicates(p, "hostname", "hostnames", " (they are Kubernetes node names)")),
    ("unique-vm-ids", lambda p: _duplicates(p, "vm_id", "VM ids", " (Proxmox VM ids are cluster-wide)")),
    (
        "unique-proxmox-nodes",
        lambda p: _duplicates(
            p,
            "proxmox_node",
            "Proxmox nodes",
            ": a failure domain is a physical host, and two GPU domains on one host both die with it",
        ),
    ),
    ("unique-vm-addresses", _address_problems),
    ("defined-sharing-profile", _sharing_defined),
    ("kernel-needs-an-ssh-key", _kernel_needs_a_key),
    ("ssh-port-needs-node-addresses", _ssh_port_needs_an_address),
    ("each-card-once-one-model-if-shared", _cards_of_a_domain),
    ("cards-the-driver-drives", _cards_the_driver_drives),
    ("raw-passthrough-needs-root", _raw_passthrough_needs_root),
    ("profile-names-are-label-values", _profile_names_are_label_values),
    ("gpu-resource-advertised", _gpu_resource_advertised),
    ("smoke-image-runs-on-the-driver", lambda p: smoke_image_problems(p.smoke_image, p.operator)),
    ("smoke-test-restricted", _smoke_test_restricted),
    ("smoke-test-steered-by-kyverno", _smoke_test_steered),
    ("no-gpu-quota-where-gpu-pool-asks-for-gpus", _no_quota_where_gpu_pool_asks_for_gpus),
    ("exporter-job-is-the-service-monitors", _exporter_job_is_the_service_monitors),
    ("reclaim-reads-the-card-rules", _reclaim_reads_the_card_rules),
    ("rollout-order", _rollout_order),
    ("rollout-max-unavailable", _rollout_max_unavailable),
    ("kernel-of-the-guest-release", _kernel_of_the_guest_release),
    *LAB_RULES,
    ("extra-values-fit-the-clusterpolicy-schema", _extra_values_schema),
    ("extra-values-compose-image-references", _extra_values_images),
)


def config_warnings(cfg: StackConfig) -> list[str]:
    """Valid, but probably not what was meant."""
    deprecated = chart_deprecation(cfg.gpu_operator.chart_version)
    warnings = [f"gpu-pool:gpuOperator.chartVersion: {deprecated}"] if deprecated else []
    if cfg.kyverno.policy_api == "cel" and "failure_policy" in cfg.gpu_quotas.model_fields_set:
        warnings.append(
            "gpu-pool:gpuQuotas.failurePolicy: has no effect with kyverno.policyApi cel: a GeneratingPolicy has no "
            "failurePolicy (its CRD has none; Kyverno creates the quota after admission); it applies to the "
            "ClusterPolicy of policyApi clusterpolicy only. Remove the key"
        )
    warnings += rke2_line_warnings(cfg.rke2.version)
    warnings += lab_warnings(cfg, parts_of(cfg))
    warnings += dropped_false_warnings(cfg.gpu_operator.extra_values, cfg.gpu_operator.chart_version)
    nfd = cfg.gpu_operator.extra_values.get("nfd")
    if isinstance(nfd, Mapping) and nfd.get("enabled") is False:
        taint = f"{cfg.kyverno.taint_key}={cfg.kyverno.taint_value}:{cfg.kyverno.taint_effect}"
        warnings.append(
            "gpu-pool:gpuOperator.extraValues.nfd.enabled: false: the chart deploys no Node Feature Discovery, so "
            f"the cluster's own NFD must label the GPU nodes ({NFD_NVIDIA_PCI_LABEL}=true, which every operand is "
            f"scheduled by) and its worker must tolerate their taint ({taint}); without both, no driver, toolkit "
            "or device plugin ever runs there"
        )
    return warnings + [
        f"gpu-pool:failureDomains[{domain.name}].sshAuthorizedKeys: none given, and cloud-init creates "
        f"{domain.username!r} without a password: the VM will have no login, and a key added later never reaches "
        "it (cloud-init runs once): add one before the VM is created"
        for domain in cfg.failure_domains
        if not domain.ssh_authorized_keys
    ]
