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

# Kubernetes: the fields pulumi-kubernetes' Diff forces a replacement on (provider/pkg/provider/diff.go, `var
# forceNew`, `var core`, `var job`, pulumi/pulumi-kubernetes@00302beb58ae08591f0c8b0b065871c50ba35250; the same at
# v4.32.0 per FIELD-REVIEW-3 D2/D6), plus the release's identity (provider/pkg/provider/helm_release.go
# forceNewFields, v4.32.0 l.907). Every object is also replaced when its name or namespace changes.
# - ConfigMap data/binaryData: the provider replaces unless it is configured with enableConfigMapMutable, which
#   gpu-pool does not set (components/shared/providers.py): a data edit is a replace, and since the name is kept,
#   a delete-first one, so the ConfigMap is briefly gone (make diff says so).
# - Job: completions, parallelism, selector (and its sub-fields) and template; not completionMode.
KUBERNETES_IMMUTABLE: Final[Mapping[str, frozenset[str]]] = {
    "kubernetes:core/v1:ConfigMap": frozenset({"data", "binaryData"}),
    "kubernetes:batch/v1:Job": frozenset(
        {
            "spec.completions",
            "spec.parallelism",
            "spec.selector",
            "spec.selector.matchExpressions",
            "spec.selector.matchLabels",
            "spec.template",
        }
    ),
    "kubernetes:helm.sh/v3:Release": frozenset({"name", "namespace"}),
}
# A Release replacement is create-before-delete (helm_release.go l.932 `DeleteBeforeReplace: false`, v4.32.0):
# the new release installs the chart while the old one still owns its cluster-scoped objects (the GPU Operator
# chart's ClusterRole, ClusterRoleBinding and ClusterPolicy, templates/clusterrole.yaml:4,
# clusterrolebinding.yaml:4, clusterpolicy.yaml:4), which Helm refuses to adopt from another release.
RELEASE_REPLACE_CREATES_FIRST: Final = True

# bpg refuses, on a running VM with reboot_after_update false, a disk move between datastores and a disk resize
# that comes with a change needing a power-off (proxmoxtf/resource/vm/vm.go at v0.111.1: shutdownForDisksRequired
# l.7245-7266 -> rebootAfterUpdateDisabledError("move disks between datastores") l.7025-7037; rebootRequired for
# cores/memory/hostpci l.6476-6478, 6686-6701 -> rebootAfterUpdateDisabledError("resize disks") l.7047-7097). The
# update fails midway, with the other changes already sent and left pending.
VM_DISK_MOVE_INPUT: Final = "disks.datastoreId"
VM_DISK_SIZE_INPUT: Final = "disks.size"
VM_REBOOT_REQUIRED_INPUTS: Final = frozenset({"cpu", "memory", "hostpcis", "machine", "bios"})
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
