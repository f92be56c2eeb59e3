"""What the providers do when an input of a resource gpu-pool registers changes: update in place or replace.

Our own table, for the resource types the program uses. The Proxmox and command entries are the inputs their
Pulumi schemas mark `willReplaceOnChanges` / `replaceOnChanges` (pulumi-proxmoxve 8.3.0, pulumi-command 1.2.1:
tests/contract/test_replacement_contract.py compares them). pulumi-kubernetes has no such marks: its provider
decides in Diff, by the rules below (pulumi-kubernetes provider/pkg/provider: a changed name or namespace, or a
field the API server treats as immutable, replaces; a replacement that keeps the name deletes first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Input paths (list indices dropped: `disks.fileId` covers `disks[0].fileId`) whose change replaces the resource.
REPLACE_ON_CHANGES: Final[Mapping[str, frozenset[str]]] = {
    "proxmoxve:index/fileLegacy:FileLegacy": frozenset(
        {"contentType", "datastoreId", "fileMode", "nodeName", "sourceFile", "sourceRaw"}
    ),
    "proxmoxve:index/vmLegacy:VmLegacy": frozenset(
        {
            "amdSev",
            "clone.datastoreId",
            "clone.full",
            "clone.nodeName",
            "clone.retries",
            "clone.vmId",
            "disks.fileId",
            "initialization.metaDataFileId",
            "initialization.networkDataFileId",
            "initialization.type",
            "initialization.userDataFileId",
            "initialization.vendorDataFileId",
        }
    ),
    "proxmoxve:hardware/mapping/pci:Pci": frozenset(),
    "command:local:Command": frozenset({"triggers"}),
    "command:remote:Command": frozenset({"triggers"}),
}

# Inputs the bpg provider replaces the VM for in its CustomizeDiff, which the schema cannot mark (proxmoxtf/
# resource/vm/vm.go, v0.111.1 under pulumi-proxmoxve 8.3.0: `customdiff.ForceNewIf(mkVMID, ...)` and
# `customdiff.ForceNewIf(mkNodeName, ... !d.Get(mkMigrate))`). Each maps to the input that waives it, if any.
PROVIDER_FORCE_NEW: Final[Mapping[str, Mapping[str, str | None]]] = {
    "proxmoxve:index/vmLegacy:VmLegacy": {"vmId": None, "nodeName": "migrate"},
}

# Kubernetes: fields the API server refuses to change (a Job's pod template and selector), and the release's
# identity. Every object is also replaced when its name or namespace changes.
KUBERNETES_IMMUTABLE: Final[Mapping[str, frozenset[str]]] = {
    "kubernetes:batch/v1:Job": frozenset({"spec.selector", "spec.template", "spec.completionMode"}),
    "kubernetes:helm.sh/v3:Release": frozenset({"name", "namespace"}),
}
KUBERNETES_IDENTITY: Final = frozenset({"metadata.name", "metadata.namespace", "apiVersion", "kind"})

# VM settings Proxmox applies only at the VM's next cold start (no CPU or memory hotplug on these VMs). The
# provider reboots the VM itself for them unless reboot_after_update is false (bpg vm.go, vmFinalizePowerState).
VM_COLD_START_INPUTS: Final = frozenset(
    {
        "cpu",
        "memory",
        "machine",
        "bios",
        "hostpcis",
        "operatingSystem",
        "scsiHardware",
        "serialDevices",
        "initialization",
    }
)
# VM settings that feed cloud-init: Proxmox derives cloud-init's instance-id from the user and network data
# (PVE::QemuServer::Cloudinit, nocloud_gen_metadata), so a change re-runs first boot at the next cold start.
VM_CLOUD_INIT_INPUTS: Final = frozenset({"initialization"})
