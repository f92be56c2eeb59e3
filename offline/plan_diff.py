"""Comparing two offline previews resource by resource, the way the engine and the providers would.

For each URN: created, deleted, updated or replaced (and whether the replacement deletes first), which inputs
changed, which of them force the replacement, and the plain sentences a user wants before `pulumi up` rather
than during it (dangers), apart from what is merely worth knowing (info).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from components.gpu_failure_domain.plan import StepName
from knowledge.driver_template import DRIVER_TEMPLATE_SECTIONS, NOT_IN_TEMPLATE
from knowledge.proxmox_access import wider_than_the_watcher_needs
from knowledge.replacements import (
    KUBERNETES_IDENTITY,
    KUBERNETES_IMMUTABLE,
    PROVIDER_FORCE_NEW,
    REPLACE_ON_CHANGES,
    VM_CLOUD_INIT_INPUTS,
    VM_COLD_START_INPUTS,
    VM_DISK_MOVE_INPUT,
    VM_DISK_SIZE_INPUT,
    VM_REBOOT_REQUIRED_INPUTS,
)
from offline.recording import Recording, Registration, is_secret

Op = Literal["create", "update", "replace", "delete", "same"]
VM = "proxmoxve:index/vmLegacy:VmLegacy"
SNIPPET = "proxmoxve:index/fileLegacy:FileLegacy"
JOB = "kubernetes:batch/v1:Job"
RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
REPAIR_ROLE = "proxmoxve:index/roleLegacy:RoleLegacy"
REPAIR_ACL = "proxmoxve:index/acl:Acl"
COMMAND_TYPES = ("command:local:Command", "command:remote:Command")
_INDEX = re.compile(r"\[\d+\]")
KERNEL_STEPS = {StepName.KERNEL_LOGIN, StepName.KERNEL_DRAIN, StepName.KERNEL_INSTALL, StepName.KERNEL_REBUILD}


@dataclass
class Change:
    urn: str
    type: str
    name: str
    op: Op
    keys: list[str] = field(default_factory=list)
    replace_keys: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    dangers: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "op": self.op,
            "keys": self.keys,
            "replaceKeys": self.replace_keys,
            "deleteBeforeReplace": self.delete_before_replace,
            "dangers": self.dangers,
            "info": self.info,
        }


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if is_secret(value):
        yield path, ("secret", json.dumps(value.get("value"), sort_keys=True))
    elif isinstance(value, Mapping) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def changed_paths(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Every leaf input path whose value differs (present on one side only counts)."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    return sorted(path for path in old.keys() | new.keys() if old.get(path, _MISSING) != new.get(path, _MISSING))


_MISSING = object()


def _covers(rule: str, path: str) -> bool:
    """`sourceRaw` covers `sourceRaw.data`; `triggers[*]` covers `triggers[0]`; indices are ignored."""
    rule = rule.replace("[*]", "")
    bare = _INDEX.sub("", path)
    return bare == rule or bare.startswith(rule + ".")


def _without_ignored(paths: list[str], ignored: list[str]) -> tuple[list[str], list[str]]:
    kept = [p for p in paths if not any(_covers(rule, p) for rule in ignored)]
    return kept, [p for p in paths if p not in kept]


def _compact(paths: list[str]) -> list[str]:
    """Readable keys: a secret leaf or a long script is named by its input, list items by their list."""
    out: list[str] = []
    for path in paths:
        key = _INDEX.sub("", path)
        if key not in out:
            out.append(key)
    return out


def replace_rules(registration: Registration) -> list[str]:
    rules = sorted(REPLACE_ON_CHANGES.get(registration.type, frozenset()))
    rules += [
        path
        for path, unless in PROVIDER_FORCE_NEW.get(registration.type, {}).items()
        if unless is None or registration.inputs.get(unless) is not True
    ]
    rules += [rule.replace("[*]", "") for rule in registration.replace_on_changes]
    if registration.type.startswith("kubernetes:") and registration.type != RELEASE:
        rules += sorted(KUBERNETES_IDENTITY)
    rules += sorted(KUBERNETES_IMMUTABLE.get(registration.type, frozenset()))
    return sorted(set(rules))


def _kubernetes_identity(inputs: Mapping[str, Any]) -> tuple[Any, Any]:
    metadata = inputs.get("metadata") or {}
    return metadata.get("name"), metadata.get("namespace")


def _provider_deletes_first(before: Registration, after: Registration) -> bool:
    """pulumi-kubernetes replaces an object that keeps its name by deleting it first (a create would collide)."""
    if not after.type.startswith("kubernetes:") or after.type == RELEASE:
        return False
    return _kubernetes_identity(before.inputs) == _kubernetes_identity(after.inputs)


def _snippet_volume(inputs: Mapping[str, Any]) -> str:
    raw = inputs.get("sourceRaw") or {}
    name = raw.get("fileName") if isinstance(raw, Mapping) else None
    return f"{inputs.get('datastoreId')}:{inputs.get('contentType')}/{name}"


def _same_identity_danger(before: Registration, after: Registration) -> str | None:
    """A create-before-delete replacement whose old delete hits what the new create made."""
    if after.type == SNIPPET and _snippet_volume(before.inputs) == _snippet_volume(after.inputs):
        return (
            f"{after.name} is replaced create-before-delete but keeps its file {_snippet_volume(after.inputs)}: "
            "the old snippet's delete removes the new file, and the VM then cannot start"
        )
    if after.type in COMMAND_TYPES and before.inputs.get("delete"):
        return (
            f"{after.name} is replaced create-before-delete: its old delete (`{before.inputs['delete']}`) runs after "
            "the new create and can undo it"
        )
    if after.type == VM and before.inputs.get("vmId") == after.inputs.get("vmId"):
        return f"{after.name} is replaced create-before-delete, but the new VM needs VM id {after.inputs.get('vmId')}"
    return None


def _vm_notes(change: Change, after: Registration) -> None:
    top = {key.split(".")[0] for key in change.keys}
    cold = sorted(top & VM_COLD_START_INPUTS)
    if cold and after.inputs.get("rebootAfterUpdate") is not False:
        change.dangers.append(
            f"the provider reboots {after.name} through the Proxmox API to apply {', '.join(cold)}, without "
            "draining its node: GPU pods on it die mid-run"
        )
    if after.inputs.get("rebootAfterUpdate") is False:
        if VM_DISK_MOVE_INPUT in change.keys:
            change.dangers.append(
                f"{after.name}: the provider refuses to move disks between datastores while the VM runs "
                "(reboot_after_update is false), so `up` fails midway with the VM's other changes left pending: "
                "move the disk in its own change with the VM stopped (qm shutdown, `pulumi up`, qm start)"
            )
        reboot = sorted(top & VM_REBOOT_REQUIRED_INPUTS)
        if VM_DISK_SIZE_INPUT in change.keys and reboot:
            change.dangers.append(
                f"{after.name}: the provider refuses to resize disks in the same update as {', '.join(reboot)} "
                "while the VM runs (reboot_after_update is false), so `up` fails midway: split the change, the "
                "disk first, then the rest in a second `up`"
            )
    if top & VM_CLOUD_INIT_INPUTS:
        change.dangers.append(
            f"{after.name}'s cloud-init settings change: Proxmox derives cloud-init's instance-id from them, so "
            "the VM's next cold start runs first boot again (new SSH host keys, the RKE2 install again)"
        )


def _command_notes(change: Change, after: Registration) -> None:
    if change.op != "update":
        return
    runs = "update" if after.inputs.get("update") else "create"
    environment = after.inputs.get("environment") or {}
    step = environment.get("GPU_POOL_STEP") if isinstance(environment, Mapping) else None
    node = environment.get("NODE_NAME") if isinstance(environment, Mapping) else None
    if step == "power-cycle":
        change.info.append(
            f"{after.name} runs: it drains {node}, power-cycles the VM if Proxmox has a change pending or the card "
            "moved, then uncordons the node (in a wave it leaves that to the wave's last step)"
        )
    elif step == "gpu-ready":
        slots = environment.get("GPU_SLOTS")
        change.info.append(
            f"{after.name} waits until {node} advertises {slots} GPU{'' if slots == '1' else 's'} on driver "
            f"{environment.get('DRIVER_VERSION')} before its smoke test runs"
        )
    elif after.name.endswith(f"-{StepName.ROLLOUT}"):
        change.info.append(
            f"{after.name} ends this domain's turn: it uncordons the node if the wave cordoned it and records "
            "the state rolled out on the Node"
        )
    else:
        change.info.append(f"{after.name} runs its {runs} command again")


def _kind_notes(change: Change, before: Registration | None, after: Registration | None) -> None:
    subject = after or before
    assert subject is not None
    if subject.type == JOB and change.op in ("create", "replace") and "cuda-smoke" in json.dumps(subject.inputs):
        node = ((subject.inputs.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector", {})
        change.info.append(f"the CUDA smoke test re-runs on {node.get('kubernetes.io/hostname', 'its node')}")
    if (
        subject.type in COMMAND_TYPES
        and subject.name.split("-", 1)[-1] in KERNEL_STEPS
        and change.op in ("create", "replace")
    ):
        change.info.append(f"{subject.name}: part of the kernel upgrade, which drains and reboots this node")
        if subject.name.endswith(f"-{StepName.KERNEL_LOGIN}"):
            change.info.append(
                f"{subject.name} logs in over SSH before the drain, with a key the VM has trusted since it was "
                "created: keys added to sshAuthorizedKeys later never reached it (cloud-init runs once)"
            )
    if subject.type == CONFIG_MAP and change.op == "replace" and change.delete_before_replace:
        metadata = subject.inputs.get("metadata") or {}
        change.info.append(
            f"{subject.name}: a ConfigMap's data cannot be updated in place by the provider (it is replaced), and "
            f"with the same name it is deleted first: {metadata.get('namespace')}/{metadata.get('name')} is gone "
            "for a moment, and a pod that mounts it and starts in that moment waits until it is back"
        )
    if subject.type == RELEASE and change.op == "replace" and "namespace" in change.replace_keys:
        change.dangers.append(
            f"{subject.name} moves to another namespace: the provider installs the new release before it deletes "
            "the old one, which still owns the chart's cluster-scoped objects (ClusterRole, ClusterRoleBinding, "
            "ClusterPolicy), and Helm refuses to take them over, so `up` fails at the new release: uninstall the "
            "old release first (`helm -n <old namespace> uninstall <release>`, the GPU pods lose their operator "
            "for that time), then `pulumi refresh` and `pulumi up`"
        )
    if (
        subject.type == RELEASE
        and change.op == "update"
        and any(k.startswith("values.driver.version") for k in change.keys)
    ):
        change.info.append(
            "the GPU Operator upgrades the driver one node at a time and deletes the GPU pods on the node it "
            "upgrades (driver.upgradePolicy); each node's smoke test waits for its upgrade to finish"
        )


def _credential_notes(change: Change, after: Registration | None) -> None:
    """The unattended repair's Proxmox roles and ACLs: what each grants, and a danger where it grants more than
    the watcher's calls need (knowledge/proxmox_access.py), whichever stack option widened it."""
    if after is None or after.type not in (REPAIR_ROLE, REPAIR_ACL) or change.op == "same":
        return
    inputs = after.inputs
    if after.type == REPAIR_ROLE:
        privileges = list(inputs.get("privileges") or [])
        change.info.append(f"Proxmox role {inputs.get('roleId')} of the repair token: {', '.join(privileges)}")
        problems = wider_than_the_watcher_needs(privileges, None, None)
    else:
        path, propagate = inputs.get("path"), bool(inputs.get("propagate"))
        change.info.append(
            f"the repair token gets role {inputs.get('roleId')} on {path}" + (" (propagated)" if propagate else "")
        )
        problems = wider_than_the_watcher_needs(None, path, propagate)
    change.dangers.extend(
        f"{after.name} widens the unattended repair's Proxmox token: {problem}; the token lives in the cluster, so "
        "keep it to VM.PowerMgmt and VM.Audit on each GPU VM and Mapping.Audit on its mapping"
        for problem in problems
    )


def _operator_notes(change: Change, before: Registration | None, after: Registration | None) -> None:
    """The GPU Operator's CRDs and chart: what a bump does on the cluster (26.7.0 release notes, PR #2527)."""
    subject = after or before
    assert subject is not None
    name = (subject.inputs.get("metadata") or {}).get("name")
    if subject.type == CRD and change.op == "update":
        change.info.append(
            f"CRD {name} gets the new chart's schema before the release upgrades: its objects stay, and fields "
            "the new operator reads are no longer pruned"
        )
    elif subject.type == CRD and change.op == "create":
        change.info.append(f"CRD {name} is new in this chart (or newly managed: adopted in place if Helm made it)")
    elif subject.type == CRD and change.op == "delete" and before is not None and before.retain_on_delete:
        change.info.append(f"CRD {name} leaves the plan but stays in the cluster with its objects (retainOnDelete)")
    if subject.type != RELEASE or change.op != "update" or before is None or after is None:
        return
    old, new = before.inputs.get("version"), after.inputs.get("version")
    if old != new:
        driver_kept = not any(k.startswith("values.driver.version") for k in change.keys)
        change.info.append(
            f"chart {old} -> {new}: the operator restarts and rolls every operand DaemonSet (toolkit, device "
            "plugin, DCGM exporter, GFD, NFD, validator) without touching GPU pods; the driver DaemonSet's template "
            "changes too (its helm.sh/chart label, the chart's driver manager), and with no upgrade slots of its "
            'own (maxUnavailable "0") the operator replaces a driver pod only on a cordoned node, so '
            + (
                "each domain's turn (driver-template, in the wave below) drains it and the operator restarts its "
                "driver there, one domain at a time"
                if driver_kept
                else "each domain's driver upgrade turn drains it first, one domain at a time"
            )
        )
    template = sorted(
        key
        for key in change.keys
        if any(key.startswith(f"values.{section}.") for section in DRIVER_TEMPLATE_SECTIONS)
        and not any(key.startswith(f"values.{path}") for path in NOT_IN_TEMPLATE)
        and not key.startswith("values.driver.version")
    )
    if old == new and template:
        change.info.append(
            f"{', '.join(template[:3])}{' ...' if len(template) > 3 else ''} render{'s' if len(template) == 1 else ''} "
            "into the driver DaemonSet's pod template (knowledge/driver_template.py): with no upgrade slots of its own "
            '(maxUnavailable "0") the operator replaces a driver pod only on a cordoned node, so each domain\'s '
            "turn (driver-template, in the wave below) drains it and the operator restarts its driver there, one "
            "domain at a time"
        )
    if before.inputs.get("chart") != after.inputs.get("chart"):
        change.info.append(f"chart source {before.inputs.get('chart')} -> {after.inputs.get('chart')}")


def compare(before: Registration | None, after: Registration | None) -> Change:
    subject = after or before
    assert subject is not None
    if before is None:
        change = Change(subject.urn, subject.type, subject.name, "create")
        _kind_notes(change, None, after)
        _operator_notes(change, None, after)
        _credential_notes(change, after)
        return change
    if after is None:
        change = Change(subject.urn, subject.type, subject.name, "delete")
        if before.protect:
            # The engine refuses a protected delete when it applies the delete step, and deletes run
            # dependents first: only the preview `up` runs before applying keeps them.
            change.dangers.append(
                f"{before.name} is protected: the preview that `pulumi up` runs first fails on its delete, so "
                "nothing is applied; `pulumi up --skip-preview` would first drain the node and delete what depends "
                "on it (its labels and taint, its smoke test) and then stop. If you mean it, set the domain's "
                "protect: false and run `pulumi up` first (or `pulumi state unprotect`)"
            )
        if before.name.endswith(f"-{StepName.NODE_CLEANUP}"):
            change.info.append(f"{before.name} deletes the Node object of the removed domain after its VM is gone")
        if before.name.endswith(f"-{StepName.RETIRE}"):
            node = str(before.inputs.get("delete", "")).split(" drain ", 1)[-1].split(" ", 1)[0]
            change.info.append(f"{before.name} drains {node} before its VM stops (PodDisruptionBudgets respected)")
        _kind_notes(change, before, None)
        _operator_notes(change, before, None)
        return change
    paths, ignored = _without_ignored(changed_paths(before.inputs, after.inputs), after.ignore_changes)
    change = Change(subject.urn, subject.type, subject.name, "same" if not paths else "update", keys=_compact(paths))
    if ignored and after.type == SNIPPET:
        change.info.append(
            f"{after.name}: the cloud-init user data changed, but cloud-init is first-boot only: it reaches VMs "
            "created from now on, not this one (ignoreChanges on sourceRaw)"
        )
    if not paths:
        return change
    rules = replace_rules(after)
    change.replace_keys = _compact([p for p in paths if any(_covers(rule, p) for rule in rules)])
    if change.replace_keys:
        change.op = "replace"
        change.delete_before_replace = after.delete_before_replace or _provider_deletes_first(before, after)
        if before.protect:
            change.dangers.append(
                f"{after.name} is protected and would be replaced ({', '.join(change.replace_keys)}): "
                "`pulumi up` stops with an error"
            )
        if after.type == VM and "initialization.userDataFileId" in change.replace_keys:
            change.dangers.append(
                f"{after.name} would boot from {after.inputs['initialization']['userDataFileId']}, which is never "
                "written: the snippet keeps its first-boot name and data (ignoreChanges), so a new hostname is a "
                "new GPU worker: add it as a new domain (name, hostname, VM id) and remove this one"
            )
        if not change.delete_before_replace:
            danger = _same_identity_danger(before, after)
            if danger:
                change.dangers.append(danger)
    if after.type == VM and change.op == "update":
        _vm_notes(change, after)
    if after.type in COMMAND_TYPES:
        _command_notes(change, after)
    _kind_notes(change, before, after)
    _operator_notes(change, before, after)
    _credential_notes(change, after)
    return change


def _disruptive(change: Change) -> bool:
    """A step that drains its node and reboots it in this `up`."""
    if change.type not in COMMAND_TYPES:
        return False
    if change.name.endswith(f"-{StepName.POWER_CYCLE}"):
        return change.op == "update"
    return change.name.endswith(f"-{StepName.KERNEL_DRAIN}") and change.op in ("create", "replace")


def _parallel_disruption(changes: list[Change]) -> None:
    """Domains are independent, so Pulumi drains and reboots them all at once unless a wave orders them (a domain
    with a `-wave-drain` step waits for the previous one): say so before the pool goes dark."""
    drain = f"-{StepName.WAVE_DRAIN}"
    waved = {c.name.removesuffix(drain) for c in changes if c.name.endswith(drain) and c.op != "same"}

    def domain(change: Change) -> str:
        return (
            change.name.rsplit("-", 2)[0]
            if change.name.endswith(f"-{StepName.KERNEL_DRAIN}")
            else change.name.removesuffix(f"-{StepName.POWER_CYCLE}")
        )

    steps = [c for c in changes if _disruptive(c) and domain(c) not in waved]
    if len(steps) > 1:
        nodes = ", ".join(domain(c) for c in steps)
        steps[0].dangers.append(
            f"{len(steps)} GPU domains ({nodes}) drain and reboot in parallel in this `up`, so their capacity is gone "
            "at the same time: apply them one at a time, e.g. `pulumi up --target '<the domain's component urn>' "
            "--target-dependents`, or change one domain per `up`"
        )


def _replaced_outputs_propagate(changes: list[Change], after: Recording) -> None:
    """A replaced resource's outputs (its id first) are unknown until the new one exists, so the engine's preview
    sees every input that takes them as changed: where that input forces a replacement (a command's `triggers`),
    the dependent is replaced too. The engine ran this: a VM replaced for a new vmId or node also replaced its
    `node-ready` step, whose triggers hold the VM's id (pulumi's step generator diffs unknown inputs as changes;
    tests/e2e/test_engine_diff.py). Repeated until nothing more follows."""
    by_urn = {change.urn: change for change in changes}
    registrations = {r.urn: r for r in after.registrations}
    grew = True
    while grew:
        grew = False
        replaced = {urn for urn, change in by_urn.items() if change.op == "replace"}
        for urn, registration in registrations.items():
            change = by_urn.get(urn)
            if change is None or change.op in ("replace", "create", "delete"):
                continue
            rules = replace_rules(registration)
            keys = sorted(
                prop
                for prop, sources in registration.property_dependencies.items()
                if replaced.intersection(sources) and any(_covers(rule, prop) for rule in rules)
            )
            if keys:
                change.op = "replace"
                change.replace_keys = _compact([*change.replace_keys, *keys])
                change.delete_before_replace = registration.delete_before_replace
                grew = True


def diff_recordings(before: Recording, after: Recording) -> list[Change]:
    old = {r.urn: r for r in before.registrations}
    new = {r.urn: r for r in after.registrations}
    changes = [compare(old.get(urn), new.get(urn)) for urn in sorted(old.keys() | new.keys())]
    _replaced_outputs_propagate(changes, after)
    _parallel_disruption(changes)
    return changes
