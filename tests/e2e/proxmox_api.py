"""What the loopback Proxmox VE stand-in answers: the calls the real bpg provider and gpu-pool's own steps make.

Each answer has the shape the PVE API documents (https://pve.proxmox.com/pve-docs/api-viewer/) and its sources
define; the source of every endpoint is named by its handler below:

- pve-manager `PVE/API2/Hardware/PCI.pm` (pciscan): `GET /nodes/{node}/hardware/pci`, fields `id class vendor
  device subsystem_vendor subsystem_device iommugroup device_name vendor_name`, default class blacklist 05;06;0b.
- pve-manager `PVE/API2/Cluster/Mapping/PCI.pm`: `/cluster/mapping/pci[/{id}]` (index, create, get, update,
  delete); a mapping is `{id, type, description, map: ["node=..,path=..,id=..,iommu-group=..,subsystem-id=.."]}`.
- qemu-server `PVE/API2/Qemu.pm`: create_vm (`POST /nodes/{node}/qemu`, a worker task, returns its UPID),
  vm_config (`GET .../config`: the config with `digest`), update_vm (`PUT`/`POST .../config`, `delete=` list),
  vm_pending (`GET .../pending`: `{key, value, pending, delete}`), resize_vm, destroy_vm; `PVE/API2/Qemu/Agent.pm`
  (`agent/ping`, `agent/network-get-interfaces` -> `{result: [...]}` as the guest agent reports it);
  `vm_status` (`status/current`) and `vm_start`/`vm_stop`/`vm_shutdown` (tasks).
- pve-manager `PVE/API2/Cluster.pm` (`GET /cluster/resources?type=vm`), `PVE/API2/Tasks.pm`
  (`GET /nodes/{node}/tasks/{upid}/status`: `{status: stopped, exitstatus: OK}`), `PVE/API2/Network.pm`
  (`GET /nodes/{node}/network`), `PVE/API2.pm` (`GET /version`).
- pve-storage `PVE/API2/Storage/Config.pm` (`GET /storage/{storage}`: `path`, `content`),
  `PVE/API2/Storage/Status.pm` (index, `GET /nodes/{node}/storage[?content=..&storage=..&enabled=1]`: one
  `{storage, type, content, enabled, active, shared, total, used, avail, used_fraction}` per datastore, `content`
  a comma list; with `content`, only the enabled datastores allowing one of those types, PVE/Storage.pm
  storage_info; at proxmox/pve-storage 0c56bad8), what the bpg provider's getDatastores reads
  (proxmox/nodes/storage/storage.go ListDatastores, v0.111.1), and
  `PVE/API2/Storage/Content.pm` (`GET/DELETE /nodes/{node}/storage/{storage}/content[/{volume}]`).

The VM lifecycle is a state machine, not a hypervisor: a VM "runs" the moment it is started, its disk import
is a name change, and the guest agent answers with the VM's configured address. Snippets are real files: the
provider writes them over real SSH into the directory `GET /storage/{snippets}` names, and the content listing
reads that directory.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

# qemu-server's config schema types these as integers or booleans (JSON numbers in the API's answers); every
# other key is a string or property string, which is how the provider sent it.
INTEGER_KEYS = {"cores", "sockets", "vcpus", "cpuunits", "shares", "migrate_speed", "bwlimit"}
BOOLEAN_KEYS = {"acpi", "onboot", "numa", "kvm", "protection", "tablet", "template", "localtime", "freeze", "reboot"}
# The size the cloud image's import gives the disk before the provider resizes it (an Ubuntu noble image).
IMPORTED_SIZE = "3584M"
DRIVE = re.compile(r"^(ide|sata|scsi|virtio)\d+$|^efidisk0$|^tpmstate0$")


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class PciFunction:
    """One line of `pvesh get /nodes/<node>/hardware/pci`."""

    id: str
    pci_class: str
    vendor: str
    device: str
    subsystem_vendor: str
    subsystem_device: str
    iommugroup: int
    device_name: str = ""
    vendor_name: str = ""

    def answer(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class": self.pci_class,
            "vendor": self.vendor,
            "device": self.device,
            "subsystem_vendor": self.subsystem_vendor,
            "subsystem_device": self.subsystem_device,
            "iommugroup": self.iommugroup,
            "device_name": self.device_name,
            "vendor_name": self.vendor_name,
        }


def a1000_host(iommu_group: int = 14, slot: str = "0000:01:00") -> list[PciFunction]:
    """An MS-01 with an RTX A1000 at 01:00 (the article's lab): the card, its audio function, a root port."""
    return [
        PciFunction("0000:00:01.0", "0x060400", "0x8086", "0xa70d", "0x8086", "0x7270", iommu_group, "root port"),
        PciFunction(
            f"{slot}.0", "0x030000", "0x10de", "0x25b0", "0x10de", "0x1757", iommu_group, "GA107GL [RTX A1000]"
        ),
        PciFunction(f"{slot}.1", "0x040300", "0x10de", "0x2291", "0x10de", "0x1757", iommu_group, "HD Audio"),
        PciFunction("0000:00:1f.6", "0x020000", "0x8086", "0x0dc7", "0x8086", "0x0000", 9, "Ethernet I219-LM"),
    ]


def h200_host(iommu_group: int = 40, slot: str = "0000:41:00") -> list[PciFunction]:
    """A host with the lent H200 at 41:00 (examples/day2/Pulumi.h200-lab.yaml's dc2, tests/fixtures/node_check/h200):
    the card alone in its IOMMU group, and the host's NIC."""
    return [
        PciFunction(f"{slot}.0", "0x030200", "0x10de", "0x2335", "0x10de", "0x18bf", iommu_group, "GH100 [H200 SXM]"),
        PciFunction("0000:00:1f.6", "0x020000", "0x8086", "0x0dc7", "0x8086", "0x0000", 9, "Ethernet I219-LM"),
    ]


@dataclass
class Vm:
    vmid: int
    node: str
    config: dict[str, Any]
    status: str = "stopped"
    pending: dict[str, str] = field(default_factory=dict)
    disks: int = 0
    # Cold starts so far: the cluster stand-in gives the node a new bootID on each.
    starts: int = 0
    # `lock` of the VM's config (a vzdump holds `backup`) and its HA state, as /cluster/resources lists them.
    lock: str = ""
    hastate: str = ""

    def volume(self, datastore: str) -> str:
        name = f"{datastore}:vm-{self.vmid}-disk-{self.disks}"
        self.disks += 1
        return name


@dataclass(frozen=True)
class Request:
    """What the stand-in was asked, for tests to assert on."""

    method: str
    path: str
    form: dict[str, list[str]]
    status: int


UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_bytes(size: str) -> int:
    """`120G`, `3584M` or plain bytes, as qemu-server's disk size property takes it."""
    unit = size[-1:].upper()
    return int(float(size[:-1]) * UNITS[unit]) if unit in UNITS else int(size)


def size_text(size: str) -> str:
    """How PVE writes a size back: the largest unit that divides it (PVE::JSONSchema format_size)."""
    count = size_bytes(size)
    for unit in ("T", "G", "M", "K"):
        if count % UNITS[unit] == 0:
            return f"{count // UNITS[unit]}{unit}"
    return str(count)


def _typed(key: str, value: str) -> Any:
    if (key in INTEGER_KEYS or key in BOOLEAN_KEYS) and value.lstrip("-").isdigit():
        return int(value)
    return value


# A default Proxmox install's two datastores (the `dir` at /var/lib/vz and the LVM-thin pool), with snippets and
# import turned on for `local` as docs/prerequisites.md asks: name -> (type, content types).
DEFAULT_DATASTORES: dict[str, tuple[str, str]] = {
    "local": ("dir", "backup,import,iso,snippets,vztmpl"),
    "local-lvm": ("lvmthin", "images,rootdir"),
}


class ProxmoxState:
    """The cluster's VMs, mappings and files, and the answer to each request."""

    def __init__(
        self,
        nodes: dict[str, list[PciFunction]],
        storage_dir: Path,
        address: str = "127.0.0.1",
        datastores: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.storage_dir = storage_dir
        self.datastores = dict(DEFAULT_DATASTORES if datastores is None else datastores)
        self.address = address
        self.vms: dict[int, Vm] = {}
        self.mappings: dict[str, dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self._upids = itertools.count(1)
        # A worker task's exit status when it is not OK (a start qemu-server refused), by UPID.
        self.task_exits: dict[str, str] = {}
        # Limited API tokens (`user@realm!name=secret` -> their ACLs, as `GET /access/permissions` answers them),
        # held to knowledge/proxmox_access.py's table (tests/e2e/proxmox_permissions.py); and what they were refused.
        self.token_acls: dict[str, dict[str, dict[str, int]]] = {}
        self.refused: list[str] = []

    # ------------------------------------------------------------------------------------------- dispatch

    def handle(self, method: str, path: str, form: dict[str, list[str]]) -> Any:
        """The `data` of PVE's answer; raises ApiError with PVE's status code for a refusal."""
        with self.lock:
            try:
                data = self._route(method, path, form)
            except ApiError as error:
                self.requests.append(Request(method, path, form, error.status))
                raise
            self.requests.append(Request(method, path, form, 200))
            return data

    def _route(self, method: str, path: str, form: dict[str, list[str]]) -> Any:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        one = {k: v[-1] for k, v in form.items()}
        match (method, parts):
            case ("GET", ["version"]):
                return {"version": "8.4.1", "release": "8.4", "repoid": "2a5fa54a8503f96d"}
            case ("GET", ["cluster", "resources"]):
                return [self._resource(vm) for vm in self.vms.values()]
            case ("GET", ["cluster", "mapping", "pci"]):
                return [{**m, "checks": []} for m in self.mappings.values()]
            case ("POST", ["cluster", "mapping", "pci"]):
                return self._mapping_create(one, form)
            case ("GET", ["cluster", "mapping", "pci", name]):
                return self._mapping(name)
            case ("PUT", ["cluster", "mapping", "pci", name]):
                return self._mapping_update(name, one, form)
            case ("DELETE", ["cluster", "mapping", "pci", name]):
                self._mapping(name)
                del self.mappings[name]
                return None
            case ("GET", ["storage", datastore]):
                return self._datastore(datastore)
            case ("GET", ["pools"]):
                # pve-manager PVE/API2/Pool.pm index: no resource pools in this cluster.
                return []
            case ("GET", ["nodes", node, *rest]):
                self._node(node)
                return self._node_get(node, rest, one)
            case (_, ["nodes", node, *rest]):
                self._node(node)
                return self._node_change(method, node, rest, one, form)
        raise ApiError(501, f"Method '{method} /{path.strip('/')}' not implemented by the gpu-pool stand-in")

    # ------------------------------------------------------------------------------------------- cluster

    def _node(self, node: str) -> list[PciFunction]:
        if node not in self.nodes:
            raise ApiError(595, f"no such cluster node '{node}'")
        return self.nodes[node]

    def _resource(self, vm: Vm) -> dict[str, Any]:
        return (
            {
                "id": f"qemu/{vm.vmid}",
                "type": "qemu",
                "vmid": vm.vmid,
                "node": vm.node,
                "name": vm.config.get("name", ""),
                "status": vm.status,
                "template": 0,
            }
            | ({"lock": vm.lock} if vm.lock else {})
            | ({"hastate": vm.hastate} if vm.hastate else {})
        )

    def _mapping(self, name: str) -> dict[str, Any]:
        if name not in self.mappings:
            raise ApiError(500, f"mapping '{name}' not found")
        return self.mappings[name]

    def _mapping_create(self, one: dict[str, str], form: dict[str, list[str]]) -> None:
        name = one["id"]
        if name in self.mappings:
            raise ApiError(500, f"mapping '{name}' already exists")
        self.mappings[name] = {"id": name, "type": "pci", "map": list(form.get("map", []))}
        if one.get("description"):
            self.mappings[name]["description"] = one["description"]
        if one.get("mdev"):
            self.mappings[name]["mdev"] = int(one["mdev"])

    def _mapping_update(self, name: str, one: dict[str, str], form: dict[str, list[str]]) -> None:
        mapping = self._mapping(name)
        if "map" in form:
            mapping["map"] = list(form["map"])
        for key in ("description", "mdev"):
            if key in one:
                mapping[key] = one[key] if key == "description" else int(one[key])
        for key in one.get("delete", "").replace(";", ",").split(","):
            mapping.pop(key.strip(), None)

    def _datastore(self, datastore: str) -> dict[str, Any]:
        # An active dir storage has a folder per content type (pve-storage PVE/Storage/Plugin.pm activate_storage
        # creates them), so the provider's `tee` into `<path>/snippets/` finds its folder.
        for kind in ("snippets", "import", "iso"):
            (self.storage_dir / datastore / kind).mkdir(parents=True, exist_ok=True)
        return {
            "storage": datastore,
            "type": "dir",
            "path": str(self.storage_dir / datastore),
            "content": "snippets,iso,import,vztmpl,images,rootdir",
            "shared": 0,
        }

    # ------------------------------------------------------------------------------------------- node reads

    def _node_get(self, node: str, rest: list[str], one: dict[str, str]) -> Any:
        match rest:
            case ["hardware", "pci"]:
                blacklist = one.get("pci-class-blacklist", "05;06;0b")
                hidden = [c for c in re.split(r"[;,]", blacklist) if c]
                return [f.answer() for f in self.nodes[node] if not any(f.pci_class[2:].startswith(c) for c in hidden)]
            case ["network"]:
                return [
                    {
                        "iface": "vmbr0",
                        "type": "bridge",
                        "address": self.address,
                        "cidr": f"{self.address}/8",
                        "gateway": self.address,
                        "active": 1,
                        "priority": 3,
                    }
                ]
            case ["tasks", upid, "status"]:
                exitstatus = self.task_exits.get(upid, "OK")
                return {"upid": upid, "status": "stopped", "exitstatus": exitstatus, "pid": 1, "node": node}
            case ["storage"]:
                return self._storage_status(one)
            case ["storage", datastore, "content"]:
                return self._content(datastore, one.get("content"))
            case ["storage", datastore, "content", volume]:
                return self._volume(node, volume)
            case ["qemu", vmid, *what]:
                return self._vm_get(self._vm(node, vmid), what)
        raise ApiError(501, f"GET /nodes/{node}/{'/'.join(rest)} not implemented by the gpu-pool stand-in")

    def _storage_status(self, one: dict[str, str]) -> list[dict[str, Any]]:
        """pve-storage Status.pm index: every datastore with its content types, sizes in bytes."""
        wanted = [c for c in re.split(r"[,;]", one.get("content", "")) if c]
        if one.get("storage") and one["storage"] not in self.datastores:
            raise ApiError(400, "Parameter verification failed. storage: No such storage.")
        found = []
        for name, (kind, content) in sorted(self.datastores.items()):
            types = content.split(",")
            if wanted and not set(wanted) & set(types):
                continue
            if one.get("storage") not in (None, name):
                continue
            total = 100 << 30
            found.append(
                {
                    "storage": name,
                    "type": kind,
                    "content": content,
                    "enabled": 1,
                    "active": 1,
                    "shared": 0,
                    "total": total,
                    "used": total // 4,
                    "avail": total - total // 4,
                    "used_fraction": 0.25,
                }
            )
        return found

    def _content(self, datastore: str, content: str | None) -> list[dict[str, Any]]:
        found = []
        for kind in ("snippets", "import", "iso"):
            directory = self.storage_dir / datastore / kind
            if content not in (None, kind) or not directory.is_dir():
                continue
            for file in sorted(directory.iterdir()):
                stat = file.stat()
                found.append(
                    {
                        "volid": f"{datastore}:{kind}/{file.name}",
                        "content": kind,
                        "format": file.suffix.lstrip(".") or "raw",
                        "size": stat.st_size,
                        "ctime": int(stat.st_ctime),
                    }
                )
        return found

    def _volume(self, node: str, volume: str) -> dict[str, Any]:
        """A VM disk's attributes (pve-storage Content.pm info), from the drive that names it."""
        for vm in self.vms.values():
            for key, value in vm.config.items():
                options = value.split(",")
                if DRIVE.match(key) and vm.node == node and options[0] == volume:
                    size = next((o.split("=", 1)[1] for o in options if o.startswith("size=")), "0")
                    name = volume.partition(":")[2]
                    return {"path": f"/dev/pve/{name}", "format": "raw", "size": size_bytes(size), "used": 0}
        raise ApiError(500, f"can't find volume '{volume}'")

    def _vm(self, node: str, vmid: str) -> Vm:
        vm = self.vms.get(int(vmid))
        if vm is None or vm.node != node:
            raise ApiError(500, f"Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
        return vm

    def _vm_get(self, vm: Vm, what: list[str]) -> Any:
        match what:
            case ["config"]:
                config = {k: _typed(k, v) for k, v in vm.config.items()}
                digest = hashlib.sha1(repr(sorted(vm.config.items())).encode()).hexdigest()
                return {**config, "digest": digest}
            case ["pending"]:
                entries = [{"key": k, "value": _typed(k, v)} for k, v in vm.config.items()]
                for entry in entries:
                    if entry["key"] in vm.pending:
                        entry["pending"] = _typed(entry["key"], vm.pending[entry["key"]])
                return entries
            case ["status", "current"]:
                return {
                    "vmid": vm.vmid,
                    "name": vm.config.get("name", ""),
                    "status": vm.status,
                    "qmpstatus": vm.status,
                    "agent": 1 if "enabled=1" in vm.config.get("agent", "") or vm.config.get("agent") == "1" else 0,
                    "uptime": 60 if vm.status == "running" else 0,
                }
            case ["agent", "network-get-interfaces"]:
                if vm.status != "running":
                    raise ApiError(500, f"VM {vm.vmid} is not running")
                return {"result": self._guest_interfaces(vm)}
        raise ApiError(501, f"GET qemu/{vm.vmid}/{'/'.join(what)} not implemented by the gpu-pool stand-in")

    def _guest_interfaces(self, vm: Vm) -> list[dict[str, Any]]:
        """What qemu-guest-agent reports: lo and the NIC with the address cloud-init gave it."""
        ipconfig = dict(p.split("=", 1) for p in vm.config.get("ipconfig0", "").split(",") if "=" in p)
        address, _, prefix = ipconfig.get("ip", "10.0.0.2/24").partition("/")
        if address == "dhcp":
            address, prefix = "10.0.0.2", "24"
        return [
            {
                "name": "lo",
                "hardware-address": "00:00:00:00:00:00",
                "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}],
            },
            {
                "name": "eth0",
                "hardware-address": "bc:24:11:00:00:%02x" % (vm.vmid % 256),
                "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": address, "prefix": int(prefix or 24)}],
            },
        ]

    # ------------------------------------------------------------------------------------------- node changes

    def _task(self, node: str, kind: str, vmid: int | str) -> str:
        return f"UPID:{node}:0000{next(self._upids):04X}:00000000:00000000:{kind}:{vmid}:root@pam!gpu-pool:"

    def _node_change(
        self, method: str, node: str, rest: list[str], one: dict[str, str], form: dict[str, list[str]]
    ) -> Any:
        match (method, rest):
            case ("POST", ["qemu"]):
                return self._vm_create(node, one)
            case ("DELETE", ["storage", datastore, "content", volume]):
                _, _, relative = volume.partition(":")
                target = self.storage_dir / datastore / relative
                if not target.is_file():
                    raise ApiError(500, f"volume '{volume}' does not exist")
                target.unlink()
                return self._task(node, "imgdel", 0)
            case ("DELETE", ["qemu", vmid]):
                vm = self._vm(node, vmid)
                if vm.status == "running":
                    raise ApiError(500, f"VM {vmid} is running - destroy failed")
                if vm.config.get("protection") == "1":
                    raise ApiError(500, f"can't remove VM {vmid} - protection mode enabled")
                del self.vms[vm.vmid]
                return self._task(node, "qmdestroy", vmid)
            case (_, ["qemu", vmid, *what]):
                return self._vm_change(method, self._vm(node, vmid), what, one)
        raise ApiError(501, f"{method} /nodes/{node}/{'/'.join(rest)} not implemented by the gpu-pool stand-in")

    def _vm_create(self, node: str, one: dict[str, str]) -> str:
        vmid = int(one.pop("vmid"))
        if vmid in self.vms:
            raise ApiError(500, f"unable to create VM {vmid} - VM {vmid} already exists on node '{node}'")
        vm = Vm(vmid, node, {})
        for key, value in one.items():
            if key != "start":
                vm.config[key] = self._stored(vm, key, value)
        self.vms[vmid] = vm
        return self._task(node, "qmcreate", vmid)

    def _stored(self, vm: Vm, key: str, value: str) -> str:
        """A drive as PVE writes it back: the volume first, `import-from` done, a cloud-init drive named."""
        if not DRIVE.match(key):
            return value
        options = [o for o in value.split(",") if o]
        volume = options.pop(0).removeprefix("file=") if options else ""
        imported = any(o.startswith("import-from=") for o in options)
        options = [o for o in options if not o.startswith("import-from=")]
        datastore, _, name = volume.partition(":")
        if name == "cloudinit":
            return f"{datastore}:vm-{vm.vmid}-cloudinit,media=cdrom"
        previous = vm.config.get(key, "").split(",")
        if previous[0] == volume and not any(o.startswith("size=") for o in options):
            # The same volume again: PVE keeps its size (qemu-server reads it from the storage).
            options += [o for o in previous[1:] if o.startswith("size=")]
        if re.fullmatch(r"\d+(\.\d+)?", name):
            volume = vm.volume(datastore)
            options = [o for o in options if not o.startswith("size=")]
            size = IMPORTED_SIZE if imported else ("4M" if key == "efidisk0" else f"{name}G")
            options.append(f"size={size}")
        options = [f"size={size_text(o[5:])}" if o.startswith("size=") else o for o in options]
        return ",".join([volume, *options])

    def _locked_task(self, node: str, kind: str, vm: Vm) -> str | None:
        """qemu-server check_lock runs inside the worker (PVE/QemuServer.pm vm_start, _do_vm_stop; pve-guest-common
        AbstractConfig.pm check_lock): the POST answers a UPID and the task fails with `VM is locked (<lock>)`,
        nothing changed (FIELD-REVIEW-6 W-2). None when the VM holds no lock."""
        if not vm.lock:
            return None
        upid = self._task(node, kind, vm.vmid)
        self.task_exits[upid] = f"VM is locked ({vm.lock})"
        return upid

    def _missing_device(self, vm: Vm) -> str | None:
        """A hostpci device of the VM that its node no longer lists (a card the host lost), or None."""
        present = {f.id.lower() for f in self.nodes.get(vm.node, [])}
        for key, value in {**vm.config, **vm.pending}.items():
            if not key.startswith("hostpci"):
                continue
            options = dict(p.split("=", 1) for p in value.split(",") if "=" in p)
            paths: list[str] = []
            if "mapping" in options and options["mapping"] in self.mappings:
                for entry in self.mappings[options["mapping"]]["map"]:
                    fields = dict(p.split("=", 1) for p in entry.split(",") if "=" in p)
                    if fields.get("node") == vm.node:
                        paths += fields.get("path", "").split(";")
            elif "host" in options or not options:
                paths.append(options.get("host") or value.split(",")[0])
            for path in filter(None, paths):
                wanted = path.lower() if "." in path else f"{path.lower()}.0"
                if wanted not in present:
                    return wanted
        return None

    def _vm_change(self, method: str, vm: Vm, what: list[str], one: dict[str, str]) -> Any:
        node = vm.node
        match (method, what):
            case ("PUT" | "POST", ["config"]):
                deletes = [k.strip() for k in re.split(r"[,;]", one.pop("delete", "")) if k.strip()]
                one.pop("digest", None)
                for key in deletes:
                    vm.config.pop(key, None)
                for key, value in one.items():
                    # Without hotplug for CPU and memory, and for a PCI device at all, a running VM keeps the
                    # change pending until its next cold start (qemu-server vmconfig_hotplug_pending).
                    if vm.status == "running" and (
                        key in ("cores", "memory", "machine", "bios") or key.startswith("hostpci")
                    ):
                        vm.pending[key] = value
                    else:
                        vm.config[key] = self._stored(vm, key, value)
                return self._task(node, "qmconfig", vm.vmid) if method == "POST" else None
            case ("PUT", ["resize"]):
                disk = one["disk"]
                size = one["size"]
                parts = [p for p in vm.config[disk].split(",") if not p.startswith("size=")]
                vm.config[disk] = ",".join([*parts, f"size={size_text(size.lstrip('+'))}"])
                return self._task(node, "resize", vm.vmid)
            case ("POST", ["status", "start"]):
                locked = self._locked_task(node, "qmstart", vm)
                if locked:
                    return locked
                if vm.status == "running":
                    raise ApiError(500, f"VM {vm.vmid} already running")
                missing = self._missing_device(vm)
                if missing:
                    # qemu-server PCI.pm prepare_pci_device dies in the start worker: the task fails, the VM stays off.
                    upid = self._task(node, "qmstart", vm.vmid)
                    self.task_exits[upid] = f"no pci device info for device '{missing}'"
                    return upid
                vm.config.update(vm.pending)
                vm.pending.clear()
                vm.status = "running"
                vm.starts += 1
                return self._task(node, "qmstart", vm.vmid)
            case ("POST", ["status", "stop" | "shutdown"]):
                locked = self._locked_task(node, "qmstop" if what[1] == "stop" else "qmshutdown", vm)
                if locked:
                    return locked
                vm.status = "stopped"
                return self._task(node, "qmstop" if what[1] == "stop" else "qmshutdown", vm.vmid)
            case ("POST", ["agent", "ping"]):
                if vm.status != "running":
                    raise ApiError(500, "QEMU guest agent is not running")
                return {}
            case ("PUT", ["cloudinit"]):
                return None
        raise ApiError(501, f"{method} qemu/{vm.vmid}/{'/'.join(what)} not implemented by the gpu-pool stand-in")
