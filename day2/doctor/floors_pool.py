"""The floors the stack itself sets up: the node, its labels and taint, the sharing profile, the advertised
capacity and the per-node CUDA smoke test."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.gpu_failure_domain.observed import FIRST_BOOT_ANNOTATION
from day2 import objects as o
from day2.doctor import traps as t
from day2.doctor.floors_types import Check, Fix, NodeContext
from day2.doctor.operands import assess, current, operand_pods
from day2.doctor.sharing import profiles, stale_gfd_labels
from day2.pool import SMOKE_JOB_NAME, SMOKE_JOB_NAME_LABEL
from knowledge.gpu_operator import (
    CONFIG_MANAGER_CONTAINER,
    DEVICE_PLUGIN_APP,
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_CONTAINER,
    GPU_FEATURE_DISCOVERY_APP,
    GPU_RESOURCE,
    OPERAND_APP_LABEL,
)
from knowledge.kubernetes import UNSCHEDULABLE_TAINT_KEY, ZONE_LABEL


def node_floor(ctx: NodeContext) -> Check:
    if ctx.node is None:
        where = f" (the stack's domain {ctx.domain.name} expects it)" if ctx.domain else ""
        return Check(False, f"no node named {ctx.name} in the cluster{where}", Fix.of("kubectl get nodes -o wide"))
    ready = o.condition(ctx.node, "Ready")
    if ready is None or ready.get("status") != "True":
        status = ready.get("status", "Unknown") if ready else "Unknown"
        why = ": ".join(str(ready.get(k)) for k in ("reason", "message") if ready and ready.get(k))
        detail = f"not Ready (Ready={status}{', ' + why if why else ''})"
        return Check(False, detail, Fix.of(f"kubectl describe node {ctx.name}"))
    cordoned = ", cordoned (spec.unschedulable)" if o.spec(ctx.node).get("unschedulable") else ""
    return Check(True, f"Ready{cordoned}")


# Where the VM keeps each first-boot step's log (components/gpu_failure_domain/first_boot.py RESULTS_DIR).
FIRST_BOOT_LOGS = "/var/lib/gpu-pool/first-boot"


def _first_boot_steps(node: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The steps the node's first-boot record lists; None where it has none (or one that cannot be read)."""
    text = o.annotations_of(node).get(FIRST_BOOT_ANNOTATION)
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    steps = record.get("steps") if isinstance(record, Mapping) else None
    return [step for step in steps if isinstance(step, Mapping)] if isinstance(steps, list) else None


def first_boot_floor(ctx: NodeContext) -> Check:
    """The VM's first boot, as it recorded it on its Node once it joined: a step that failed (the guest agent apt
    could not install, the kernel holds) left the boot going, and is named here with its error."""
    steps = _first_boot_steps(ctx.node or {})
    if steps is None:
        return Check(True, f"no record ({FIRST_BOOT_ANNOTATION}): a VM created before gpu-pool recorded its first boot")
    failed = [step for step in steps if step.get("exit") not in (0, None)]
    if not failed:
        return Check(True, f"{len(steps)} steps, none failed")
    said = "; ".join(
        f"{step.get('step')} failed (exit {step.get('exit')}"
        + (f", {step['url']}" if step.get("url") else "")
        + f"): {step.get('error') or 'no output'}"
        for step in failed
    )
    command = f"ssh {ctx.name} sudo cat {FIRST_BOOT_LOGS}/{failed[0].get('step')}.log"
    detail = (
        f"first boot: {said}; the node joined without it (once fixed on the VM: kubectl annotate node {ctx.name} "
        f"{FIRST_BOOT_ANNOTATION}-)"
    )
    return Check(False, detail, Fix.of(command))


def _wanted_labels(ctx: NodeContext) -> dict[str, str | None]:
    """Label -> value the node must carry; None: any value, as long as the label is there."""
    marking = ctx.facts.marking
    wanted: dict[str, str | None] = {marking.label_key: marking.label_value}
    if ctx.domain is not None:
        wanted[ZONE_LABEL] = ctx.domain.name
        wanted[DEVICE_PLUGIN_CONFIG_LABEL] = ctx.domain.sharing
    else:
        wanted[DEVICE_PLUGIN_CONFIG_LABEL] = None
    return wanted


def labels_floor(ctx: NodeContext) -> Check:
    have = o.labels(ctx.node or {})
    wanted = _wanted_labels(ctx)
    problems: list[str] = []
    to_set: list[str] = []
    for key, value in wanted.items():
        actual = have.get(key)
        if actual is None:
            problems.append(f"{key} missing")
        elif value is not None and actual != value:
            problems.append(f"{key} is {actual}, {'the stack says' if ctx.facts.stack else 'expected'} {value}")
        else:
            continue
        to_set.append(f"{key}={value if value is not None else '<profile>'}")
    if problems:
        command = f"kubectl label node {ctx.name} {' '.join(to_set)} --overwrite"
        return Check(False, "; ".join(problems), Fix.of(command))
    return Check(True, ", ".join(f"{key}={have[key]}" for key in wanted))


def sharing_floor(ctx: NodeContext) -> Check:
    """The node's profile is in the ConfigMap, the plugin can read it, it gives the stack's slots, and GPU Feature
    Discovery's sharing labels on the node are of it (not of an earlier version of it)."""
    cm = f"{ctx.ns}/{ctx.facts.time_slicing_configmap}"
    if ctx.configmap is None:
        detail = f"ConfigMap {cm} not found: the device plugin has no profiles"
        return Check(False, detail, Fix.of(ctx.pulumi_up(), t.TIME_SLICING_ORDER))
    keys = sorted(profiles(ctx.configmap))
    if ctx.profile not in keys:
        fallback = ctx.domain.sharing if ctx.domain is not None and ctx.domain.sharing in keys else "<profile>"
        detail = (
            f"profile {ctx.profile} (label {DEVICE_PLUGIN_CONFIG_LABEL}) is not a key of ConfigMap {cm} "
            f"(keys: {', '.join(keys) or 'none'}): the device plugin cannot load it and the card advertises 0 GPUs"
        )
        command = f"kubectl label node {ctx.name} {DEVICE_PLUGIN_CONFIG_LABEL}={fallback} --overwrite"
        return Check(False, detail, Fix.of(command, t.TIME_SLICING_ORDER))
    if ctx.configmap_slots is None:
        detail = f"profile {ctx.profile} in ConfigMap {cm} is not a device-plugin config (version: v1)"
        return Check(
            False, detail, Fix.of(f"kubectl -n {ctx.ns} get configmap {ctx.facts.time_slicing_configmap} -o yaml")
        )
    stack_slots = ctx.facts.profile_slots.get(ctx.profile)
    if stack_slots is not None and stack_slots != ctx.configmap_slots:
        detail = (
            f"profile {ctx.profile} in ConfigMap {cm} gives {ctx.configmap_slots} slots per card, the stack's "
            f"sharingProfiles.{ctx.profile} gives {stack_slots}"
        )
        return Check(False, detail, Fix.of(ctx.pulumi_up()))
    stale = stale_gfd_labels(o.labels(ctx.node or {}), ctx.reading) if ctx.reading is not None else []
    if stale:
        # GFD's config-manager reloads on a change of the node's profile label only (k8s-device-plugin v0.20.0
        # cmd/config-manager/main.go:273-280): a profile edited in place leaves GFD labelling with the old one.
        detail = (
            f"GPU Feature Discovery labels an earlier version of profile {ctx.profile}: {'; '.join(stale)}. It reloads "
            f"only when {DEVICE_PLUGIN_CONFIG_LABEL} changes, not when the profile is edited in place"
        )
        command = (
            f"kubectl -n {ctx.ns} delete pod -l {OPERAND_APP_LABEL}={GPU_FEATURE_DISCOVERY_APP} "
            f"--field-selector spec.nodeName={ctx.name}"
        )
        return Check(False, detail, Fix.of(command))
    slots = ctx.configmap_slots
    return Check(True, f"profile {ctx.profile} in {cm}: {slots} slot{'s' if slots != 1 else ''} per card")


def taint_floor(ctx: NodeContext) -> Check:
    marking = ctx.facts.marking
    node_taints = o.taints(ctx.node or {})
    found = any(
        t_.get("key") == marking.taint_key
        and str(t_.get("value", "")) == marking.taint_value
        and t_.get("effect") == marking.taint_effect
        for t_ in node_taints
    )
    cordoned = any(t_.get("key") == UNSCHEDULABLE_TAINT_KEY for t_ in node_taints)
    if not found:
        detail = f"no {marking.taint} taint: pods that need no GPU can land on this node and crowd it"
        return Check(False, detail, Fix.of(f"kubectl taint node {ctx.name} {marking.taint} --overwrite", t.GPU_TAINT))
    return Check(True, marking.taint + (f", and {UNSCHEDULABLE_TAINT_KEY} (cordoned)" if cordoned else ""))


def gpu_capacity_floor(ctx: NodeContext) -> Check:
    advertised_text = o.allocatable(ctx.node or {}, GPU_RESOURCE)
    advertised = int(advertised_text) if advertised_text and advertised_text.isdigit() else 0
    expected = ctx.expected_slots
    plugin = current(operand_pods(ctx.snapshot, ctx.ns, DEVICE_PLUGIN_APP, ctx.name))
    plugin_logs = assess(plugin, ctx.ns, DEVICE_PLUGIN_APP, DEVICE_PLUGIN_CONTAINER).command
    shown = advertised_text if advertised_text is not None else "no"
    if expected is None or advertised != expected:
        detail = f"allocatable {GPU_RESOURCE} is {shown}, profile {ctx.profile} gives {expected}"
        if advertised == 0:
            detail += ": GPU pods wait with 'Insufficient nvidia.com/gpu'"
            return Check(False, detail, Fix.of(plugin_logs, t.INSUFFICIENT_GPU))
        detail += ": the device plugin has not applied the profile"
        reload = f"kubectl -n {ctx.ns} logs {o.name(plugin)} -c {CONFIG_MANAGER_CONTAINER}" if plugin else plugin_logs
        return Check(False, detail, Fix.of(reload))
    return Check(True, f"allocatable {GPU_RESOURCE} {advertised}, as profile {ctx.profile} gives")


def smoke_floor(ctx: NodeContext) -> Check:
    ns = ctx.facts.smoke_namespace
    jobs = [
        j
        for j in ctx.snapshot.jobs
        if o.namespace(j) == ns
        and o.labels(j).get(SMOKE_JOB_NAME_LABEL) == SMOKE_JOB_NAME
        and o.node_selector_hostname(o.job_template_spec(j)) == ctx.name
    ]
    job = o.newest(jobs)
    if job is None and not ctx.facts.smoke_test_enabled:
        return Check(True, f"off in stack {ctx.facts.stack} (gpu-pool:smokeTest.enabled: false): no smoke Job expected")
    if job is None:
        detail = f"no smoke Job ({SMOKE_JOB_NAME_LABEL}={SMOKE_JOB_NAME}) pinned to this node in {ns}"
        return Check(False, detail, Fix.of(ctx.pulumi_up()))
    name = o.name(job)
    if o.condition_true(job, "Complete"):
        return Check(True, f"{name}: Complete")
    failed = o.condition(job, "Failed")
    if failed is not None and failed.get("status") == "True":
        why = ": ".join(str(failed.get(k)) for k in ("reason", "message") if failed.get(k))
        command = f"kubectl -n {ns} logs job/{name}"
        traps = (t.NVML_MISMATCH, t.KUBEARMOR, t.CDI_UNREAD, t.MISSING_RUNTIME_CLASS)
        return Check(False, f"{name}: Failed ({why})", Fix.of(command, *traps))
    active = int(o.status(job).get("active") or 0)
    command = f"kubectl -n {ns} get pods -l job-name={name} -o wide"
    return Check(False, f"{name}: not finished ({active} active)", Fix.of(command))
