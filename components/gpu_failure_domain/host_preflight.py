"""Proxmox host preflight: each card is where the config says, is NVIDIA's, and sits in an IOMMU group of its own.

Passthrough is the floor under the whole tower: a card that is not at its address, or shares its
IOMMU group, fails late (at VM start) and says little. This runs at preview time, read-only.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.shared.local_run import run_quietly
from components.shared.preflight import SKIPPED_OFFLINE, PreflightError
from config.failure_domain import NVIDIA_VENDOR_ID, FailureDomainConfig, GpuConfig
from config.proxmox import ProxmoxConfig

SKIPPED_DISABLED = "skipped: gpu-pool:preflight.enabled is false"


@dataclass(frozen=True)
class PciDevice:
    id: str
    vendor: str
    device: str
    subsystem_vendor: str
    subsystem_device: str
    iommu_group: int
    name: str = ""
    pci_class: str = ""

    @property
    def is_bridge(self) -> bool:
        """PCI class 06 (host, PCI-to-PCI, root port...): vfio accepts a bridge in the card's IOMMU group."""
        return _hex(self.pci_class).startswith("06")

    @property
    def vendor_device(self) -> str:
        return f"{_hex(self.vendor)}:{_hex(self.device)}"

    @property
    def subsystem(self) -> str:
        return f"{_hex(self.subsystem_vendor)}:{_hex(self.subsystem_device)}"


def _hex(value: str) -> str:
    value = value.lower()
    return value[2:] if value.startswith("0x") else value


def pci_device(raw: Mapping[str, Any] | Any) -> PciDevice:
    """From the provider's `getPci` device (an object or, under mocks, a dict)."""

    def get(name: str, default: Any = "") -> Any:
        if isinstance(raw, Mapping):
            return raw.get(name, default)
        return getattr(raw, name, default)

    return PciDevice(
        id=str(get("id")),
        vendor=str(get("vendor")),
        device=str(get("device")),
        subsystem_vendor=str(get("subsystem_vendor") or get("subsystemVendor")),
        subsystem_device=str(get("subsystem_device") or get("subsystemDevice")),
        iommu_group=int(get("iommu_group", None) if get("iommu_group", None) is not None else get("iommuGroup", -1)),
        name=str(get("device_name") or get("deviceName") or ""),
        pci_class=str(get("class_") or get("class") or ""),
    )


def _slot(address: str) -> str:
    """`0000:01:00.0` -> `0000:01:00`: all functions of one card share the slot."""
    return address.split(".")[0]


def pci_problems(domain: FailureDomainConfig, devices: Iterable[PciDevice]) -> list[str]:
    """What is wrong with the domain's cards on their host, as one sentence each naming the domain and node."""
    devices = list(devices)
    problems: list[str] = []
    for index, card in enumerate(domain.cards):
        problems += _card_problems(domain, domain.card_key(index), card, devices)
    return problems


def _card_problems(domain: FailureDomainConfig, key: str, card: GpuConfig, devices: list[PciDevice]) -> list[str]:
    where = f"domain {domain.name} (node {domain.proxmox_node})"
    wanted = card.pci_address
    found = [d for d in devices if d.id == wanted or _slot(d.id) == wanted]
    if not found:
        nvidia = [f"{d.id} ({d.vendor_device})" for d in devices if _hex(d.vendor) == NVIDIA_VENDOR_ID]
        listed = ", ".join(nvidia) if nvidia else "no NVIDIA device at all"
        return [f"{where}: no PCI device at {wanted}; NVIDIA devices on this host: {listed}"]
    gpu = next((d for d in found if d.id.endswith(".0") or d.id == wanted), found[0])
    problems: list[str] = []
    if _hex(gpu.vendor) != NVIDIA_VENDOR_ID:
        problems.append(f"{where}: {gpu.id} is {gpu.vendor_device} {gpu.name!r}, not an NVIDIA device (10de)")
    elif gpu.vendor_device != card.vendor_device_id:
        problems.append(
            f"{where}: {gpu.id} is {gpu.vendor_device} {gpu.name!r}, "
            f"but {key}.vendorDeviceId says {card.vendor_device_id}"
        )
    if gpu.subsystem != card.subsystem_id and _hex(gpu.subsystem_vendor):
        problems.append(
            f"{where}: {gpu.id} has subsystem id {gpu.subsystem}, config says {card.subsystem_id} ({key}.subsystemId)"
        )
    if gpu.iommu_group < 0:
        problems.append(f"{where}: {gpu.id} is in no IOMMU group: IOMMU is off on the host (intel_iommu=on?)")
        return problems
    if gpu.iommu_group != card.iommu_group:
        problems.append(
            f"{where}: {gpu.id} is in IOMMU group {gpu.iommu_group}, config says {card.iommu_group} ({key}.iommuGroup)"
        )
    # Bridges and root ports in the group are fine (vfio-pci does not need them bound); another endpoint
    # would be taken from the host with the card, or the VM refuses to start. Another card of the same domain
    # in the group goes into the same VM, so it is no reason to refuse.
    own = {_slot(other.pci_address) for other in domain.cards}
    sharing = sorted(
        f"{d.id} ({d.name or d.vendor_device})"
        for d in devices
        if d.iommu_group == gpu.iommu_group and _slot(d.id) not in own and not d.is_bridge
    )
    if sharing:
        problems.append(
            f"{where}: {gpu.id} shares IOMMU group {gpu.iommu_group} with {', '.join(sharing)}; only the card, "
            "its own functions (audio) and PCIe bridges may be in it, or passthrough takes the others with it"
        )
    return problems


def pci_summary(domain: FailureDomainConfig, devices: Iterable[PciDevice]) -> str:
    devices = list(devices)
    parts = []
    for card in domain.cards:
        functions = ", ".join(sorted(d.id for d in devices if _slot(d.id) == _slot(card.pci_address)))
        parts.append(f"{card.vendor_device_id} at {functions}, IOMMU group {card.iommu_group} of its own")
    return "passed: " + "; ".join(parts)


def _function(card: GpuConfig) -> str:
    return card.pci_address if "." in card.pci_address else f"{card.pci_address}.0"


def host_check_command(domain: FailureDomainConfig, ssh_user: str, address: str, port: int = 22) -> str:
    """Read-only: which driver holds each card (one line each), and whether the kernel made any IOMMU groups."""
    drivers = "; ".join(
        f'basename "$(readlink /sys/bus/pci/devices/{_function(card)}/driver)"' for card in domain.cards
    )
    remote = f"{drivers}; ls /sys/kernel/iommu_groups | wc -l"
    target = shlex.quote(f"{ssh_user}@{address}")
    return f"ssh -o BatchMode=yes -o ConnectTimeout=10 -p {port} {target} {shlex.quote(remote)}"


def host_check_problems(domain: FailureDomainConfig, stdout: str) -> list[str]:
    where = f"domain {domain.name} (node {domain.proxmox_node})"
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    cards = domain.cards
    if len(lines) < len(cards) + 1:
        return [f"{where}: host check printed {stdout!r}; expected each card's driver and the IOMMU group count"]
    drivers, groups = lines[: len(cards)], lines[len(cards)]
    problems: list[str] = []
    for card, driver in zip(cards, drivers, strict=True):
        if driver != "vfio-pci":
            problems.append(
                f"{where}: {card.pci_address} is bound to {driver!r} on the host, not vfio-pci "
                "(bind it with vfio-pci ids=... and blacklist nouveau/nvidia on the host)"
            )
    if not groups.isdigit() or int(groups) == 0:
        problems.append(f"{where}: the host has no IOMMU groups: enable IOMMU (intel_iommu=on iommu=pt) and reboot")
    return problems


@dataclass(frozen=True)
class DatastoreNeed:
    """A datastore the plan writes to or reads from on every node, and the content type that must be on for it."""

    key: str
    datastore: str
    content: str
    what: str


def datastore_needs(proxmox: ProxmoxConfig) -> list[DatastoreNeed]:
    """What the VMs need of each node's storage: the snippet upload (`snippets`), the disk and cloud-init drive
    (`images`), and the cloud image the disk is imported from (`import`; qemu-server takes nothing else)."""
    image_store = proxmox.cloud_image.partition(":")[0]
    return [
        DatastoreNeed(
            "gpu-pool:proxmox.snippetsDatastore", proxmox.snippets_datastore, "snippets", "the cloud-init user data"
        ),
        DatastoreNeed(
            "gpu-pool:proxmox.diskDatastore", proxmox.disk_datastore, "images", "the VM disk and cloud-init drive"
        ),
        DatastoreNeed("gpu-pool:proxmox.cloudImage", image_store, "import", "the cloud image the disk is made from"),
    ]


def _field(raw: Mapping[str, Any] | Any, *names: str) -> Any:
    for name in names:
        value = raw.get(name) if isinstance(raw, Mapping) else getattr(raw, name, None)
        if value is not None:
            return value
    return None


def datastore_problems(node: str, needs: Iterable[DatastoreNeed], datastores: Iterable[Any]) -> list[str]:
    """The bpg provider's `getDatastores` answer for one node (pve-storage's `GET /nodes/{node}/storage`, the
    storages the token may see: Datastore.Audit or Datastore.AllocateSpace) against what the plan needs."""
    found = {str(_field(d, "id", "storage")): d for d in datastores}
    problems: list[str] = []
    for need in needs:
        store = found.get(need.datastore)
        if store is None:
            listed = ", ".join(sorted(found)) or "none"
            problems.append(
                f"{need.key}: node {node} has no datastore {need.datastore!r} it lets the API token see (its "
                f"datastores: {listed}); {need.what} needs one with the {need.content} content type: name one, or "
                f"give the token Datastore.Audit on /storage/{need.datastore}"
            )
            continue
        content = [str(c) for c in _field(store, "content_types", "contentTypes", "content") or []]
        if isinstance(_field(store, "content"), str):
            content = str(_field(store, "content")).split(",")
        if _field(store, "enabled") is False or _field(store, "active") is False:
            problems.append(
                f"{need.key}: datastore {need.datastore!r} is disabled or not active on node {node}; {need.what} "
                "goes there: enable it (Datacenter > Storage) or name another"
            )
        if need.content not in content:
            wanted = ",".join(sorted({*content, need.content}))
            problems.append(
                f"{need.key}: datastore {need.datastore!r} on node {node} has the content types "
                f"{','.join(sorted(content)) or 'none'}, not {need.content}, which {need.what} needs: "
                f"pvesm set {need.datastore} --content {wanted} (or Datacenter > Storage > {need.datastore} > Content)"
            )
    return problems


def run_preflight(
    domains: Iterable[FailureDomainConfig],
    *,
    enabled: bool,
    host_check: bool,
    ssh_user: str,
    node_addresses: Mapping[str, str],
    provider: Any,
    ssh_port: int = 22,
    offline: bool,
    datastores: Sequence[DatastoreNeed] = (),
) -> dict[str, str]:
    """Look every card up on its host and, with `datastores` (`datastore_needs(cfg.proxmox)`), each node's storage
    (provider invokes, read-only). Raises PreflightError with every problem."""
    import pulumi
    import pulumi_proxmoxve as proxmoxve

    domains = list(domains)
    if offline:
        return {domain.name: SKIPPED_OFFLINE for domain in domains}
    if not enabled:
        return {domain.name: SKIPPED_DISABLED for domain in domains}
    problems: list[str] = []
    report: dict[str, str] = {}
    if datastores:
        for node in dict.fromkeys(domain.proxmox_node for domain in domains):
            stores = proxmoxve.get_datastores(node_name=node, opts=pulumi.InvokeOptions(provider=provider))
            problems += datastore_problems(node, datastores, stores.datastores or [])
    for domain in domains:
        result = proxmoxve.hardware.get_pci(
            node_name=domain.proxmox_node,
            # Every class: PVE's default list hides bridges (06) but also memory controllers (05) and
            # processors (0b), which would then pass unseen in the card's group. Bridges are judged above.
            pci_class_blacklists=[],
            opts=pulumi.InvokeOptions(provider=provider),
        )
        devices = [pci_device(d) for d in (result.devices or [])]
        found = pci_problems(domain, devices)
        if host_check and not found:
            address = node_addresses.get(domain.proxmox_node, domain.proxmox_node)
            ran = run_quietly(host_check_command(domain, ssh_user, address, ssh_port))
            found = host_check_problems(domain, ran.stdout)
        problems += found
        report[domain.name] = pci_summary(domain, devices) + (", bound to vfio-pci" if host_check else "")
    if problems:
        raise PreflightError(problems)
    return report


# ------------------------------------------------------------------------------ the proxy, from each Proxmox host

# What curl prints after the request: the proxy's answer to CONNECT (000: none, the proxy was not reached).
_CONNECT_MARK = "connect="


def proxy_connect_remote(proxy: str, host: str, port: int) -> str:
    """Read-only, run on a Proxmox host: an HTTPS request to the installer's host through the proxy, which curl
    opens with CONNECT. Prints curl's error, if any, and the proxy's answer to CONNECT."""
    url = f"https://{host}:{port}/"
    return (
        f"curl -sS -o /dev/null --max-time 15 --proxy {shlex.quote(proxy)} "
        f"-w '{_CONNECT_MARK}%{{http_connect}}\\n' {shlex.quote(url)} 2>&1; true"
    )


def _over_ssh(ssh_user: str, address: str, port: int, remote: str) -> str:
    target = shlex.quote(f"{ssh_user}@{address}")
    return f"ssh -o BatchMode=yes -o ConnectTimeout=10 -p {port} {target} {shlex.quote(remote)}"


def proxy_connect_warning(node: str, proxy: str, host: str, port: int, stdout: str) -> str | None:
    """None where the proxy answered CONNECT with 200; else one line naming the host and what the proxy said."""
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    codes = [line.removeprefix(_CONNECT_MARK) for line in lines if line.startswith(_CONNECT_MARK)]
    code = codes[-1] if codes else ""
    if code == "200":
        return None
    said = "; ".join(line for line in lines if not line.startswith(_CONNECT_MARK)) or "nothing"
    answer = f"the proxy answered CONNECT with {code}" if code not in ("", "000") else "no answer from the proxy"
    return (
        f"Proxmox node {node}: an HTTPS CONNECT through {proxy} to {host}:{port} failed ({answer}; curl: {said}): "
        f"the VMs behind this proxy cannot download the RKE2 installer; allow {host}:{port} on the proxy, or set "
        "gpu-pool:rke2.installer to a mirror (docs/air-gap.md)"
    )


def run_proxy_preflight(
    nodes: Iterable[str],
    *,
    proxy: str,
    hosts: Sequence[tuple[str, int]],
    ssh_user: str,
    node_addresses: Mapping[str, str],
    ssh_port: int = 22,
    run: Any = None,
) -> list[str]:
    """With preflight.hostCheck and a proxy: from each Proxmox host (on the VMs' network), a CONNECT through the
    proxy to each installer host. Warnings, not refusals: the proxy may answer a VM where it does not answer the
    host."""
    runner = run if run is not None else (lambda script: run_quietly(script).stdout)
    warnings = []
    for node in dict.fromkeys(nodes):
        address = node_addresses.get(node, node)
        for host, port in hosts:
            stdout = runner(_over_ssh(ssh_user, address, ssh_port, proxy_connect_remote(proxy, host, port)))
            warning = proxy_connect_warning(node, proxy, host, port, stdout)
            if warning is not None:
                warnings.append(warning)
    return warnings
