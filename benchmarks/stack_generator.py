"""Stack configs with N failure domains, grown from Pulumi.prod.yaml, for scale benchmarks and tests.

Every generated domain is a copy of a prod domain with its own identity: a Proxmox node of its own (two GPU
domains on one host would be refused), VM id, hostname, mapping name and subnet. Sharing profiles and quota
namespaces grow with the pool. With as many domains as the template has (3 for prod) the result is the
template itself, so the smallest scale case is exactly the real stack.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from pathlib import Path
from typing import Any

import yaml

from config.project import PROJECT
from offline.runner import ROOT_DIR, read_stack_file

NAMESPACE = PROJECT
DOMAINS_KEY = f"{NAMESPACE}:failureDomains"
PROFILES_KEY = f"{NAMESPACE}:sharingProfiles"
PROXMOX_KEY = f"{NAMESPACE}:proxmox"
QUOTAS_KEY = f"{NAMESPACE}:gpuQuotas"
TEMPLATE_STACK = "prod"
# A real pool has a handful of card classes, not one profile per card: one more profile per ten domains.
DOMAINS_PER_PROFILE = 10
MAX_PROFILES = 12
MAX_REPLICAS = 64
# Generated quota caps stay small so they stay below the pool's schedulable GPUs (no "never binds" warnings).
MAX_GENERATED_QUOTA = 4


def _stem(name: str) -> str:
    return re.sub(r"\d+$", "", name) or "domain"


def _renamed(value: str, old_name: str, new_name: str, index: int) -> str:
    """`pve-dc1` -> `pve-dc57` when the template value carries the domain's name, else a numbered suffix."""
    if old_name in value:
        return value.replace(old_name, new_name)
    return f"{value}-{index}"


def _shifted_address(address: str, prefix_length: int, steps: int) -> str:
    """The same host in the `steps`-th next subnet: 10.10.21.51/24 shifted by 2 is 10.10.23.51/24."""
    interface = ipaddress.IPv4Interface(address) if "/" in address else None
    host = interface.ip if interface else ipaddress.IPv4Address(address)
    shifted = ipaddress.IPv4Address(int(host) + steps * (1 << (32 - prefix_length)))
    return f"{shifted}/{interface.network.prefixlen}" if interface else str(shifted)


def _vm_id(template_domains: list[dict[str, Any]], index: int) -> int:
    """Ids continue the template's own spacing (4101, 4201, ... in prod), so they never repeat."""
    first = int(template_domains[0]["vmId"])
    step = int(template_domains[1]["vmId"]) - first if len(template_domains) > 1 else 1
    return first + (index - 1) * (step if step > 0 else 1)


def _profiles(template: dict[str, Any], domains: int) -> dict[str, Any]:
    profiles: dict[str, Any] = copy.deepcopy(template)
    wanted = min(MAX_PROFILES, max(len(profiles), domains // DOMAINS_PER_PROFILE))
    replicas = 2
    while len(profiles) < wanted and replicas <= MAX_REPLICAS:
        name = f"time-sliced-x{replicas}"
        if name not in profiles:
            profiles[name] = {"replicas": replicas}
        replicas += 1
    return profiles


def _domain(
    template_domains: list[dict[str, Any]], profile_names: list[str], index: int, prefix_length: int
) -> dict[str, Any]:
    base = copy.deepcopy(template_domains[(index - 1) % len(template_domains)])
    first = template_domains[0]
    name = f"{_stem(str(first['name']))}{index}"
    base["name"] = name
    base["proxmoxNode"] = _renamed(str(first["proxmoxNode"]), str(first["name"]), name, index)
    base["hostname"] = _renamed(str(first["hostname"]), str(first["name"]), name, index)
    base["vmId"] = _vm_id(template_domains, index)
    if index > len(template_domains):
        base["sharing"] = profile_names[(index - 1) % len(profile_names)]
    network = dict(base.get("network") or {})
    for key in ("ipv4", "gateway"):
        value = (first.get("network") or {}).get(key)
        if isinstance(value, str) and value != "dhcp":
            network[key] = _shifted_address(value, prefix_length, index - 1)
    base["network"] = network
    return base


def _prefix_length(template_domains: list[dict[str, Any]]) -> int:
    ipv4 = (template_domains[0].get("network") or {}).get("ipv4", "dhcp")
    return ipaddress.IPv4Interface(ipv4).network.prefixlen if ipv4 != "dhcp" else 24


def _node_addresses(proxmox: dict[str, Any], template_domains: list[dict[str, Any]], domains: list[dict[str, Any]],
                    prefix_length: int) -> dict[str, Any]:  # fmt: skip
    """Generated Proxmox nodes get an address where the template gives its nodes one (same host, next subnet)."""
    ssh = dict(proxmox.get("ssh") or {})
    addresses: dict[str, str] = dict(ssh.get("nodeAddresses") or {})
    first_address = addresses.get(str(template_domains[0]["proxmoxNode"]))
    if not first_address:
        return proxmox
    for index, domain in enumerate(domains, start=1):
        addresses.setdefault(str(domain["proxmoxNode"]), _shifted_address(first_address, prefix_length, index - 1))
    return {**proxmox, "ssh": {**ssh, "nodeAddresses": addresses}}


def _quotas(template: dict[str, Any], template_domains: int, domains: int) -> dict[str, Any]:
    """One more capped team namespace per domain beyond the template's: quotas grow with the pool they share."""
    quotas = copy.deepcopy(template)
    namespaces = dict(quotas.get("namespaces") or {})
    for index in range(template_domains + 1, domains + 1):
        namespaces.setdefault(f"gpu-team-{index}", (index - 1) % MAX_GENERATED_QUOTA + 1)
    quotas["namespaces"] = namespaces
    return quotas


def generate_stack_config(domains: int, *, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid `gpu-pool:*` config map (as `read_stack_file` returns it) with `domains` failure domains.

    Keys other than domains, sharing profiles and quotas are copied from the template unchanged, so keys the
    stack gains later are benchmarked too.
    """
    if domains < 1:
        raise ValueError(f"a stack needs at least one failure domain, got {domains}")
    source = copy.deepcopy(template if template is not None else read_stack_file(TEMPLATE_STACK, ROOT_DIR))
    template_domains: list[dict[str, Any]] = source[DOMAINS_KEY]
    prefix_length = _prefix_length(template_domains)
    profiles = _profiles(source.get(PROFILES_KEY) or {}, domains)
    names = sorted(profiles)
    generated = [_domain(template_domains, names, index, prefix_length) for index in range(1, domains + 1)]
    source[DOMAINS_KEY] = generated
    source[PROFILES_KEY] = profiles
    if isinstance(source.get(PROXMOX_KEY), dict):
        source[PROXMOX_KEY] = _node_addresses(source[PROXMOX_KEY], template_domains, generated, prefix_length)
    if isinstance(source.get(QUOTAS_KEY), dict):
        source[QUOTAS_KEY] = _quotas(source[QUOTAS_KEY], len(template_domains), domains)
    return source


def write_stack_file(directory: Path, stack: str, config: dict[str, Any]) -> Path:
    """Pulumi.<stack>.yaml holding `config`, for `python -m offline.preview --stack-dir`."""
    path = directory / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return path
