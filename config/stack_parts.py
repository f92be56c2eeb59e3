"""The parts of a stack config the rules across keys read (config/cross_key.py, config/lab_rules.py, the rendered
plan's rules): from a StackConfig that parsed, or from whatever parses of one that did not, so that a stack with a
single-key mistake still hears about its cross-key ones in the same run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from config.errors import domain_label
from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from config.gpu_quotas import GpuQuotasConfig
from config.kyverno import KyvernoConfig
from config.monitoring import MonitoringConfig
from config.proxmox import ProxmoxConfig
from config.proxy import AptMirrorConfig, ProxyConfig
from config.reclaim import ReclaimConfig
from config.registries import RegistryMirrorConfig, registry_mirrors
from config.repair import RepairConfig
from config.rke2 import Rke2Config
from config.rollout import RolloutConfig
from config.sharing import SharingProfile
from config.smoke_test import SmokeTestConfig
from config.stack import StackConfig
from config.trust import read_bundle

PROFILES: TypeAdapter[dict[str, SharingProfile]] = TypeAdapter(dict[str, SharingProfile])


@dataclass
class StackParts:
    """The parts of a stack config the rules read; None (or a missing domain) where that part did not parse.

    A domain with a single-key mistake still takes part: the keys that failed are listed in `unknown` (by the
    domain's label) and stand in with placeholders that no rule reads, so a duplicate hostname is still reported
    beside a malformed PCI address of the same domain."""

    domains: list[tuple[str, FailureDomainConfig]] = field(default_factory=list)
    profiles: Mapping[str, SharingProfile] | None = None
    proxmox: ProxmoxConfig | None = None
    kyverno: KyvernoConfig | None = None
    operator_namespace: str | None = None
    operator: GpuOperatorConfig | None = None
    smoke_namespace: str | None = None
    smoke_image: str | None = None
    rollout: RolloutConfig | None = None
    rke2: Rke2Config | None = None
    proxy: ProxyConfig | None = None
    registry_mirrors: Mapping[str, RegistryMirrorConfig] | None = None
    apt_mirror: AptMirrorConfig | None = None
    air_gapped: bool = False
    # The lab CA's bundle (canonical PEM); None where none is set or it did not parse.
    trusted_ca: str | None = None
    monitoring: MonitoringConfig | None = None
    smoke: SmokeTestConfig | None = None
    quotas: GpuQuotasConfig | None = None
    reclaim: ReclaimConfig | None = None
    repair: RepairConfig | None = None
    unknown: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def known(self, label: str, attr: str) -> bool:
        """Whether a domain's `attr` parsed (a placeholder stands in where it did not)."""
        return attr not in self.unknown.get(label, frozenset())


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
        rke2=cfg.rke2,
        proxy=cfg.proxy,
        registry_mirrors=cfg.mirrors,
        apt_mirror=cfg.apt_mirror,
        air_gapped=cfg.air_gapped,
        trusted_ca=cfg.trusted_ca,
        monitoring=cfg.monitoring,
        smoke=cfg.smoke_test,
        quotas=cfg.gpu_quotas,
        reclaim=cfg.reclaim,
        repair=cfg.repair,
    )


def _mirrors(value: Any) -> Mapping[str, RegistryMirrorConfig] | None:
    """The registry mirrors where they parse (their own key's message says what is wrong otherwise)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return registry_mirrors(dict(value))
    except (ValueError, TypeError):
        return None


def _bundle(value: Any) -> str | None:
    """The lab CA where it reads (its own key's message says what is wrong otherwise)."""
    if not isinstance(value, str):
        return None
    try:
        return read_bundle(value)
    except ValueError:
        return None


def _parsed(parse: Any, value: Any) -> Any:
    try:
        return parse(value)
    except ValidationError:
        return None


_FIELD_BY_ALIAS = {(f.alias or name): name for name, f in FailureDomainConfig.model_fields.items()}
# Values a required key of a domain takes while its own failed to parse: valid, and never read by a rule.
_CARD_PLACEHOLDER = {
    "pciAddress": "0000:00:00",
    "vendorDeviceId": "10de:2204",
    "model": "unknown",
    "iommuGroup": 0,
    "subsystemId": "10de:0000",
}


def _placeholder(alias: str, index: int) -> Any:
    return {
        "name": f"unparsed-{index}",
        "proxmoxNode": f"unparsed-{index}",
        "hostname": f"unparsed-{index}",
        "vmId": 100 + index,
        "sharing": f"unparsed-{index}",
        "gpu": _CARD_PLACEHOLDER,
    }.get(alias)


def partial_domain(item: Any, index: int) -> tuple[FailureDomainConfig, frozenset[str]] | None:
    """The domain with the keys that failed replaced by placeholders, and which those are (their attribute names);
    None when the failure is not a key's own (a rule across the domain's keys, or not a map at all)."""
    if not isinstance(item, Mapping):
        return None
    data = dict(item)
    unknown: set[str] = set()
    for _ in range(len(_FIELD_BY_ALIAS)):
        try:
            return FailureDomainConfig.model_validate(data), frozenset(unknown)
        except ValidationError as error:
            failed = {str(e["loc"][0]) for e in error.errors() if e["loc"] and isinstance(e["loc"][0], str)}
            if not failed or not failed <= set(_FIELD_BY_ALIAS) or any(not e["loc"] for e in error.errors()):
                return None
            for alias in failed:
                if alias in ("gpu", "gpus"):
                    data.pop("gpus", None)
                    data["gpu"] = _CARD_PLACEHOLDER
                    unknown.add("cards")
                    continue
                replacement = _placeholder(alias, index)
                if replacement is None:
                    data.pop(alias, None)
                else:
                    data[alias] = replacement
                unknown.add(_FIELD_BY_ALIAS[alias])
    return None


def parts_from_raw(raw: Mapping[str, Any]) -> StackParts:
    """What parses of a stack config that as a whole did not."""
    domains_raw = raw.get("failureDomains")
    domains: list[tuple[str, FailureDomainConfig]] = []
    unknown: dict[str, frozenset[str]] = {}
    if isinstance(domains_raw, list):
        for index, item in enumerate(domains_raw):
            found = partial_domain(item, index)
            if found is not None:
                label = domain_label(domains_raw, index)
                domains.append((label, found[0]))
                if found[1]:
                    unknown[label] = found[1]
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
        rke2=_parsed(Rke2Config.model_validate, raw["rke2"]) if "rke2" in raw else None,
        proxy=_parsed(ProxyConfig.model_validate, raw.get("proxy", {})),
        registry_mirrors=_mirrors(raw.get("registryMirrors", {})),
        apt_mirror=_parsed(AptMirrorConfig.model_validate, raw["aptMirror"]) if "aptMirror" in raw else None,
        air_gapped=raw.get("airGapped") is True,
        trusted_ca=_bundle(raw.get("trustedCa")),
        repair=_parsed(RepairConfig.model_validate, raw.get("repair", {})),
        monitoring=_parsed(MonitoringConfig.model_validate, raw.get("monitoring", {})),
        smoke=smoke,
        quotas=_parsed(GpuQuotasConfig.model_validate, raw.get("gpuQuotas", {})),
        reclaim=_parsed(ReclaimConfig.model_validate, raw.get("reclaim", {})),
        unknown=unknown,
    )
