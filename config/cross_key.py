"""Rules no single key can check, run on whatever parts of the stack config parse, so that a stack with a
single-key mistake still hears about its cross-key ones in the same run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from config.card_driver import card_driver_problems, smoke_image_problems
from config.earlier_file import waived
from config.errors import domain_label
from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from config.kyverno import KyvernoConfig
from config.proxmox import ProxmoxConfig
from config.rke2 import RKE2_VERSION
from config.rollout import RolloutConfig
from config.sharing import SharingProfile
from config.smoke_test import SmokeTestConfig
from config.stack import StackConfig
from config.validators import LABEL_VALUE
from knowledge.driver_matrix import chart_deprecation
from knowledge.gpu_operator import GPU_RESOURCE
from knowledge.rke2 import GPU_OPERATOR_RKE2_MINORS, RKE2_LINE_CONTAINERD

DEFAULT_SSH_PORT = 22
PROFILES: TypeAdapter[dict[str, SharingProfile]] = TypeAdapter(dict[str, SharingProfile])


@dataclass
class StackParts:
    """The parts of a stack config the rules read; None (or a missing domain) where that part did not parse."""

    domains: list[tuple[str, FailureDomainConfig]] = field(default_factory=list)
    profiles: Mapping[str, SharingProfile] | None = None
    proxmox: ProxmoxConfig | None = None
    kyverno: KyvernoConfig | None = None
    operator_namespace: str | None = None
    operator: GpuOperatorConfig | None = None
    smoke_namespace: str | None = None
    smoke_image: str | None = None
    rollout: RolloutConfig | None = None


def parts_of(cfg: StackConfig) -> StackParts:
    names = [{"name": domain.name} for domain in cfg.failure_domains]
    return StackParts(
        domains=[(domain_label(names, index), domain) for index, domain in enumerate(cfg.failure_domains)],
        profiles=cfg.sharing_profiles,
        proxmox=cfg.proxmox,
        kyverno=cfg.kyverno,
        operator_namespace=cfg.gpu_operator.namespace,
        operator=cfg.gpu_operator,
        smoke_namespace=cfg.smoke_test.namespace,
        smoke_image=cfg.smoke_test.image if cfg.smoke_test.enabled else None,
        rollout=cfg.rollout,
    )


def _parsed(parse: Any, value: Any) -> Any:
    try:
        return parse(value)
    except ValidationError:
        return None


def parts_from_raw(raw: Mapping[str, Any]) -> StackParts:
    """What parses of a stack config that as a whole did not."""
    domains_raw = raw.get("failureDomains")
    domains: list[tuple[str, FailureDomainConfig]] = []
    if isinstance(domains_raw, list):
        for index, item in enumerate(domains_raw):
            domain = _parsed(FailureDomainConfig.model_validate, item)
            if domain is not None:
                domains.append((domain_label(domains_raw, index), domain))
    operator = _parsed(GpuOperatorConfig.model_validate, raw.get("gpuOperator", {}))
    smoke = _parsed(SmokeTestConfig.model_validate, raw.get("smokeTest", {}))
    return StackParts(
        domains=domains,
        profiles=_parsed(PROFILES.validate_python, raw["sharingProfiles"]) if "sharingProfiles" in raw else None,
        proxmox=_parsed(ProxmoxConfig.model_validate, raw["proxmox"]) if "proxmox" in raw else None,
        kyverno=_parsed(KyvernoConfig.model_validate, raw.get("kyverno", {})),
        operator_namespace=operator.namespace if operator else None,
        operator=operator,
        smoke_namespace=smoke.namespace if smoke else None,
        smoke_image=smoke.image if smoke and smoke.enabled else None,
        rollout=_parsed(RolloutConfig.model_validate, raw.get("rollout", {})),
    )


def _duplicates(parts: StackParts, attr: str, what: str, why: str) -> list[str]:
    counts = Counter(getattr(domain, attr) for _, domain in parts.domains)
    problems: list[str] = []
    seen: dict[Any, str] = {}
    alias = FailureDomainConfig.model_fields[attr].alias or attr
    for label, domain in parts.domains:
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


def cross_key_problems(parts: StackParts) -> list[str]:
    """Each message names the key path of the offending entry (a domain by its name)."""
    problems = [
        *_duplicates(parts, "name", "domain names", ""),
        *_duplicates(parts, "hostname", "hostnames", " (they are Kubernetes node names)"),
        *_duplicates(parts, "vm_id", "VM ids", " (Proxmox VM ids are cluster-wide)"),
        *_duplicates(
            parts,
            "proxmox_node",
            "Proxmox nodes",
            ": a failure domain is a physical host, and two GPU domains on one host both die with it",
        ),
    ]
    for label, domain in parts.domains:
        where = f"gpu-pool:failureDomains[{label}]"
        if parts.profiles is not None and domain.sharing not in parts.profiles:
            defined = ", ".join(sorted(parts.profiles))
            problems.append(
                f"{where}.sharing: {domain.sharing!r} is not a defined sharing profile "
                f"(defined in gpu-pool:sharingProfiles: {defined}); a node label naming a missing profile "
                "takes that card from 1 schedulable GPU to 0"
            )
        if domain.kernel is not None and not domain.ssh_authorized_keys:
            no_key = (
                f"{where}.kernel: the kernel upgrade logs in to the VM over SSH as {domain.username!r}, but the "
                "domain has no sshAuthorizedKeys: add the public key whose private half is in your ssh-agent or "
                "in the secret gpu-pool:sshPrivateKey"
            )
            if not waived(no_key):
                problems.append(no_key)
        if (
            parts.proxmox is not None
            and parts.proxmox.ssh.port != DEFAULT_SSH_PORT
            and domain.proxmox_node not in parts.proxmox.ssh.node_addresses
        ):
            # bpg takes a port only in an ssh.node {name, address, port} entry; nodes it finds on its own (the
            # API's address for the node) get port 22 (proxmoxtf/provider/provider.go apiResolver, v0.111.1).
            problems.append(
                f"{where}.proxmoxNode: gpu-pool:proxmox.ssh.port is {parts.proxmox.ssh.port}, but node "
                f"{domain.proxmox_node!r} has no address in gpu-pool:proxmox.ssh.nodeAddresses, so the provider "
                f"would upload its snippet to port 22: add `{domain.proxmox_node}: <its address>` there"
            )
        problems += _card_problems(where, domain, parts.profiles)
        problems += card_driver_problems(where, domain, parts.operator)
        raw_keys = [domain.card_key(i) for i, card in enumerate(domain.cards) if card.passthrough == "raw"]
        if raw_keys and parts.proxmox is not None and parts.proxmox.auth != "rootPassword":
            problems.append(
                f"{where}.{raw_keys[0]}.passthrough: 'raw' assigns a raw PCI id, which Proxmox only allows root@pam "
                "to do (an API token fails with an unhelpful error); use 'mapping', or set gpu-pool:proxmox.auth to "
                "rootPassword"
            )
    for name in parts.profiles or {}:
        if not name or not LABEL_VALUE.match(name):
            problems.append(
                f"gpu-pool:sharingProfiles.{name}: the profile name is also the value of the node label "
                "nvidia.com/device-plugin.config: at most 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit"
            )
    if parts.kyverno is not None and parts.kyverno.gpu_resource != GPU_RESOURCE:
        problems.append(
            f"gpu-pool:kyverno.gpuResource: {parts.kyverno.gpu_resource!r} is not what the device plugin advertises "
            f"({GPU_RESOURCE}; the time-slicing profiles keep renameByDefault false), so the policy "
            "would never see a GPU pod"
        )
    problems += smoke_image_problems(parts.smoke_image, parts.operator)
    if parts.smoke_namespace is not None and parts.smoke_namespace == parts.operator_namespace:
        problems.append(
            f"gpu-pool:smokeTest.namespace: {parts.operator_namespace!r} is the operator's privileged namespace; "
            "the smoke test must prove a GPU pod works under the restricted Pod Security Standard"
        )
    return problems + _rollout_problems(parts)


def _rollout_problems(parts: StackParts) -> list[str]:
    if parts.rollout is None:
        return []
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
    if parts.domains and parts.rollout.max_unavailable > len(parts.domains):
        problems.append(
            f"gpu-pool:rollout.maxUnavailable: {parts.rollout.max_unavailable} is more than the "
            f"{len(parts.domains)} failure domains: at most {len(parts.domains)} (1 keeps all but one serving)"
        )
    return problems


def rke2_line_warnings(version: str) -> list[str]:
    """An RKE2 line newer than any gpu-pool knows: accepted (every line from v1.33 ships containerd 2), but said."""
    match = RKE2_VERSION.match(version)
    if not match:
        return []
    minor = (int(match[1]), int(match[2]))
    newest_line = max(RKE2_LINE_CONTAINERD)
    lowest, highest = GPU_OPERATOR_RKE2_MINORS
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
    return warnings + [
        f"gpu-pool:failureDomains[{domain.name}].sshAuthorizedKeys: none given, and cloud-init creates "
        f"{domain.username!r} without a password: the VM will have no login, and a key added later never reaches "
        "it (cloud-init runs once): add one before the VM is created"
        for domain in cfg.failure_domains
        if not domain.ssh_authorized_keys
    ]
