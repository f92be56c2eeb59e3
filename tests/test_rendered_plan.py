"""The invariant pass on the rendered plan (components/rendered_plan.py): every trap rule, broken through every key
its `keys` name (the stack file as a user writes it, run through the real program: refused before anything is
registered, one message naming that key), and broken on a rendered plan directly, so no rule is a test that cannot
fail. docs/traps.md names each rule; a test here keeps the two lists equal."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

from components.gpu_platform.release_values import release_values
from components.rendered_plan import RULE_IDS, RULES, RenderedNode, RenderedPlan, render, rule, tolerates
from components.stack_check import validate_stack
from config.stack_parts import parts_of
from offline.runner import ROOT_DIR, read_stack_file
from tests.config.refusal import FD, Run, refused

Config = dict[str, Any]


def _operator(c: Config) -> dict[str, Any]:
    section: dict[str, Any] = c.setdefault("gpu-pool:gpuOperator", {})
    return section


def _extra(c: Config, values: dict[str, Any]) -> None:
    _operator(c)["extraValues"] = values


def _kyverno(c: Config, **keys: Any) -> None:
    c.setdefault("gpu-pool:kyverno", {}).update(keys)


def _small_vm_big_driver(c: Config) -> None:
    c[FD][1]["memoryMiB"] = 8192
    _operator(c)["driverResources"] = {"requests": {"memory": "8Gi"}, "limits": {"memory": "8Gi"}}


# (rule, key) -> (how a user breaks the rule through that key, what the refusal says; None: the key reaches the
# rule but the program keeps it true, which `HOLDS` checks on the rendered values instead).
BREAKS: dict[tuple[str, str], tuple[Callable[[Config], None], str | None]] = {
    ("driver-build-memory", "gpuOperator.driverResources.limits.memory"): (
        lambda c: _operator(c).update(driverResources={"limits": {"memory": "512Mi"}}),
        "gpu-pool:gpuOperator.driverResources.limits.memory: the driver container's memory limit 512Mi is below the "
        "4Gi its compile of the kernel module needs",
    ),
    ("driver-build-memory", "gpuOperator.extraValues.driver.resources"): (
        lambda c: _extra(c, {"driver": {"resources": {"limits": {"memory": "512Mi"}}}}),
        "gpu-pool:gpuOperator.extraValues: 'driver.resources.limits.memory' would override driver.resources",
    ),
    ("driver-built-from-source", "gpuOperator.usePrecompiled"): (
        lambda c: _operator(c).update(usePrecompiled=True),
        "gpu-pool:gpuOperator: usePrecompiled: true needs driverVersion to be a driver branch",
    ),
    ("driver-built-from-source", "gpuOperator.extraValues.driver.usePrecompiled"): (
        lambda c: _extra(c, {"driver": {"usePrecompiled": True}}),
        "'driver.usePrecompiled' would override driver.usePrecompiled",
    ),
    ("driver-supported", "gpuOperator.driverVersion"): (
        lambda c: _operator(c).update(chartVersion="v26.3.2", driverVersion="570.133.20"),
        "gpu-pool:gpuOperator: driver 570.133.20 is not supported by GPU Operator v26.3.2",
    ),
    ("driver-supported", "gpuOperator.extraValues.driver.version"): (
        lambda c: _extra(c, {"driver": {"version": "570.133.20"}}),
        "'driver.version' would override driver.version",
    ),
    ("toolkit-reaches-rke2-containerd", "gpuOperator.toolkit.containerdSocket"): (
        lambda c: _operator(c).update(toolkit={"containerdSocket": "/run/containerd/containerd.sock"}),
        "gpu-pool:gpuOperator.toolkit.containerdSocket: /run/containerd/containerd.sock is not the containerd",
    ),
    ("toolkit-reaches-rke2-containerd", "gpuOperator.extraValues.toolkit.env"): (
        lambda c: _extra(c, {"toolkit": {"env": []}}),
        "'toolkit.env' would override toolkit.env",
    ),
    ("runtime-class-rke2-registers", "gpuOperator.extraValues.operator.runtimeClass"): (
        lambda c: _extra(c, {"operator": {"runtimeClass": "nvidia-legacy"}}),
        "'operator.runtimeClass' would override operator.runtimeClass",
    ),
    ("cdi-injects-devices", "gpuOperator.extraValues.cdi.enabled"): (
        lambda c: _extra(c, {"cdi": {"enabled": False}}),
        "'cdi.enabled' would override cdi.enabled",
    ),
    ("cdi-injects-devices", "gpuOperator.extraValues.cdi.nriPluginEnabled"): (
        lambda c: _extra(c, {"cdi": {"nriPluginEnabled": True}}),
        "'cdi.nriPluginEnabled' would override cdi.nriPluginEnabled",
    ),
    ("containerd-2", "rke2.version"): (
        lambda c: c["gpu-pool:rke2"].update(version="v1.31.5+rke2r1"),
        "gpu-pool:rke2.version: ships containerd 1.7",
    ),
    ("operands-tolerate-the-gpu-taint", "kyverno.taintKey"): (
        lambda c: _kyverno(c, taintKey="gpu.example.com/dedicated"),
        None,
    ),
    ("operands-tolerate-the-gpu-taint", "kyverno.taintEffect"): (
        lambda c: _kyverno(c, taintEffect="NoExecute"),
        None,
    ),
    ("operands-tolerate-the-gpu-taint", "gpuOperator.extraValues.node-feature-discovery.worker.tolerations"): (
        lambda c: _extra(c, {"node-feature-discovery": {"worker": {"tolerations": []}}}),
        "gpu-pool:gpuOperator.extraValues.node-feature-discovery.worker.tolerations: NFD's worker would not tolerate "
        "the taint the GPU nodes carry (nvidia.com/gpu=true:NoSchedule)",
    ),
    ("operands-tolerate-the-gpu-taint", "gpuOperator.extraValues.daemonsets.tolerations"): (
        lambda c: _extra(c, {"daemonsets": {"tolerations": []}}),
        "'daemonsets.tolerations' would override daemonsets.tolerations",
    ),
    ("nfd-master-tolerates-the-control-plane", "gpuOperator.extraValues.node-feature-discovery.master.tolerations"): (
        lambda c: _extra(c, {"node-feature-discovery": {"master": {"tolerations": []}}}),
        "would override node-feature-discovery.master.tolerations",
    ),
    ("dcgm-exporter-memory", "gpuOperator.dcgmExporterResources.limits.memory"): (
        lambda c: _operator(c).update(dcgmExporterResources={"limits": {"memory": "256Mi"}}),
        "gpu-pool:gpuOperator.dcgmExporterResources.limits.memory: the DCGM exporter's memory limit 256Mi is below "
        "the 1Gi it needs",
    ),
    ("dcgm-exporter-memory", "gpuOperator.extraValues.dcgmExporter.resources"): (
        lambda c: _extra(c, {"dcgmExporter": {"resources": {"limits": {"memory": "256Mi"}}}}),
        "would override dcgmExporter.resources",
    ),
    ("time-slicing-config-exists", "failureDomains[].sharing"): (
        lambda c: c[FD][0].update(sharing="a1000-x8"),
        f"{FD}[dc1].sharing: 'a1000-x8' is not a defined sharing profile",
    ),
    ("time-slicing-config-exists", "gpuOperator.extraValues.devicePlugin.config"): (
        lambda c: _extra(c, {"devicePlugin": {"config": {"name": "mine"}}}),
        "would override devicePlugin.config",
    ),
    ("kubelet-self-labels", "kyverno.gpuNodeLabelKey"): (
        lambda c: _kyverno(c, gpuNodeLabelKey="node-role.kubernetes.io/gpu"),
        "gpu-pool:kyverno.gpuNodeLabelKey: 'node-role.kubernetes.io/gpu' is in a kubernetes.io namespace a kubelet "
        "may not set on its own node",
    ),
    ("gpu-node-label-lands", "kyverno.gpuNodeLabelKey"): (
        lambda c: _kyverno(c, gpuNodeLabelKey="topology.kubernetes.io/zone"),
        "gpu-pool:kyverno.gpuNodeLabelKey: 'topology.kubernetes.io/zone' is also a label the stack or the kubelet "
        "sets on the node (there 'dc1' for failureDomains[dc1])",
    ),
    ("operands-fit-the-vm", "gpuOperator.driverResources.requests.memory"): (
        lambda c: _operator(c).update(driverResources={"requests": {"memory": "40Gi"}, "limits": {"memory": "40Gi"}}),
        "gpu-pool:gpuOperator.driverResources.requests.memory: the driver and DCGM exporter request 40960 MiB "
        "together, more than failureDomains[dc1]'s VM has for pods (32668 MiB of memoryMiB 32768)",
    ),
    ("operands-fit-the-vm", "gpuOperator.dcgmExporterResources.requests.memory"): (
        lambda c: _operator(c).update(
            dcgmExporterResources={"requests": {"memory": "33Gi"}, "limits": {"memory": "33Gi"}}
        ),
        "gpu-pool:gpuOperator.dcgmExporterResources.requests.memory: the driver and DCGM exporter request 33792 MiB",
    ),
    ("operands-fit-the-vm", "failureDomains[].memoryMiB"): (
        lambda c: _small_vm_big_driver(c),
        "more than failureDomains[dc2]'s VM has for pods (8092 MiB of memoryMiB 8192)",
    ),
    ("node-label-values", "failureDomains[].hostname"): (
        lambda c: c[FD][0].update(hostname="rke2-worker-dc1-gpu-a-" + "x" * 50),
        f"{FD}[dc1].hostname: 'rke2-worker-dc1-gpu-a-{'x' * 50}' is 72 characters; it is the node name and the "
        "kubelet's kubernetes.io/hostname label, whose value may have at most 63",
    ),
    ("one-crd-owner", "gpuOperator.extraValues.operator.upgradeCRD"): (
        lambda c: _extra(c, {"operator": {"upgradeCRD": False}}),
        "would override operator.upgradeCRD",
    ),
    ("dcgm-metrics-follow-the-csv", "gpuOperator.extraValues.dcgmExporter.config"): (
        lambda c: _extra(c, {"dcgmExporter": {"config": {"name": "mine"}}}),
        "would override dcgmExporter.config",
    ),
    ("dcgm-metrics-follow-the-csv", "gpuOperator.extraValues.dcgmExporter.annotations"): (
        lambda c: _extra(c, {"dcgmExporter": {"annotations": {"gpu-pool/dcgm-metrics-sha256": "0"}}}),
        "would override dcgmExporter.annotations.gpu-pool/dcgm-metrics-sha256",
    ),
    ("operands-enabled", "gpuOperator.extraValues.driver.enabled"): (
        lambda c: _extra(c, {"driver": {"enabled": False}}),
        "gpu-pool:gpuOperator.extraValues.driver.enabled: the plan needs the operator's driver",
    ),
    ("operands-enabled", "gpuOperator.extraValues.toolkit.enabled"): (
        lambda c: _extra(c, {"toolkit": {"enabled": False}}),
        "gpu-pool:gpuOperator.extraValues.toolkit.enabled: the plan needs the operator's toolkit",
    ),
    ("operands-enabled", "gpuOperator.extraValues.devicePlugin.enabled"): (
        lambda c: _extra(c, {"devicePlugin": {"enabled": False}}),
        "gpu-pool:gpuOperator.extraValues.devicePlugin.enabled: the plan needs the operator's devicePlugin",
    ),
    ("operands-enabled", "gpuOperator.extraValues.dcgmExporter.enabled"): (
        lambda c: _extra(c, {"dcgmExporter": {"enabled": False}}),
        "gpu-pool:gpuOperator.extraValues.dcgmExporter.enabled: the plan needs the operator's dcgmExporter",
    ),
}


def test_every_key_a_rule_names_has_a_case_that_breaks_it_and_no_case_names_a_key_the_rule_does_not() -> None:
    declared = {(r.id, key) for r in RULES for key in r.keys}

    assert set(BREAKS) == declared


@pytest.mark.parametrize(
    ("rule_id", "key"),
    [case for case, (_, says) in BREAKS.items() if says is not None],
    ids=[f"{r} through {k}" for (r, k), (_, says) in BREAKS.items() if says is not None],
)
def test_a_rule_broken_through_a_key_is_refused_naming_that_key(
    run_stack_program: Run, prod_config: Config, monitor: Any, rule_id: str, key: str
) -> None:
    breaks, says = BREAKS[rule_id, key]
    breaks(prod_config)

    message = refused(run_stack_program, prod_config, monitor)

    assert says is not None and says in message
    assert "Traceback" not in message
    # One message for the one mistake (the same words are never said twice).
    lines = message.splitlines()[1:]
    assert len(lines) == len(set(lines))


def _prod_parts(change: Callable[[Config], None] | None = None) -> Any:
    config = copy.deepcopy(read_stack_file("prod"))
    if change is not None:
        change(config)
    return parts_of(validate_stack({k.removeprefix("gpu-pool:"): v for k, v in config.items()}))


@pytest.mark.parametrize(
    ("rule_id", "key"),
    [case for case, (_, says) in BREAKS.items() if says is None],
    ids=[f"{r} through {k}" for (r, k), (_, says) in BREAKS.items() if says is None],
)
def test_a_key_the_program_follows_keeps_the_rule_true_on_the_rendered_values(rule_id: str, key: str) -> None:
    breaks, _ = BREAKS[rule_id, key]
    plan = render(_prod_parts(breaks))

    assert rule(rule_id).check(plan) == []
    assert plan.marking is not None and plan.values is not None
    for path in ("daemonsets", "node-feature-discovery"):
        section = plan.values[path]
        tolerations = section["tolerations"] if path == "daemonsets" else section["worker"]["tolerations"]
        assert any(tolerates(t, plan.marking.taint) for t in tolerations)


# --- every rule can fail: broken on a rendered plan directly --------------------------------------------------


def _values(plan: RenderedPlan, path: str, value: Any) -> RenderedPlan:
    values = copy.deepcopy(dict(plan.values or {}))
    node = values
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return dataclasses.replace(plan, values=values)


def _nodes(plan: RenderedPlan, change: Callable[[RenderedNode], RenderedNode]) -> RenderedPlan:
    return dataclasses.replace(plan, nodes=tuple(change(n) for n in plan.nodes))


def _user_data(node: RenderedNode, change: Callable[[dict[str, Any]], None]) -> RenderedNode:
    data = copy.deepcopy(dict(node.user_data or {}))
    change(data)
    return dataclasses.replace(node, user_data=data)


def _agent(node: RenderedNode, **changes: Any) -> RenderedNode:
    return dataclasses.replace(node, agent_config={**(node.agent_config or {}), **changes})


DOCTORED: dict[str, Callable[[RenderedPlan], RenderedPlan]] = {
    "driver-build-memory": lambda p: _values(p, "driver.resources.limits.memory", "512Mi"),
    "driver-built-from-source": lambda p: _values(p, "driver.usePrecompiled", True),
    "kernel-held": lambda p: _nodes(
        p, lambda n: _user_data(n, lambda d: d.update(runcmd=[c for c in d["runcmd"] if "apt-mark" not in c]))
    ),
    "driver-supported": lambda p: _values(p, "driver.version", "570.133.20"),
    "toolkit-reaches-rke2-containerd": lambda p: _values(
        p, "toolkit.env", [{"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"}]
    ),
    "runtime-class-rke2-registers": lambda p: _values(p, "operator.runtimeClass", "runc"),
    "cdi-injects-devices": lambda p: _values(p, "cdi.enabled", False),
    "containerd-2": lambda p: _nodes(
        p,
        lambda n: _user_data(
            n,
            lambda d: d.update(runcmd=[re.sub(r'VERSION="[^"]+"', 'VERSION="v1.31.5+rke2r1"', c) for c in d["runcmd"]]),
        ),
    ),
    "operands-tolerate-the-gpu-taint": lambda p: _values(p, "daemonsets.tolerations", []),
    "nfd-master-tolerates-the-control-plane": lambda p: _values(p, "node-feature-discovery.master.tolerations", []),
    "dcgm-exporter-memory": lambda p: _values(p, "dcgmExporter.resources.limits.memory", "256Mi"),
    "nouveau-kept-out": lambda p: _nodes(p, lambda n: _user_data(n, lambda d: d.update(write_files=[]))),
    "time-slicing-config-exists": lambda p: _values(p, "devicePlugin.config.create", True),
    "gpu-taint-at-registration": lambda p: _nodes(p, lambda n: _agent(n, **{"node-taint": []})),
    "node-registered-with-its-labels": lambda p: _nodes(p, lambda n: _agent(n, **{"node-label": []})),
    "kubelet-self-labels": lambda p: _nodes(p, lambda n: _agent(n, **{"node-label": ["node-role.kubernetes.io/gpu="]})),
    "gpu-node-label-lands": lambda p: _nodes(
        p, lambda n: dataclasses.replace(n, labels={**n.labels, "nodepool": "cpu"})
    ),
    "operands-fit-the-vm": lambda p: _values(p, "driver.resources.requests.memory", "64Gi"),
    "node-label-values": lambda p: _nodes(
        p, lambda n: dataclasses.replace(n, labels={**n.labels, "kubernetes.io/hostname": "x" * 64})
    ),
    "one-crd-owner": lambda p: _values(p, "operator.upgradeCRD", False),
    "dcgm-metrics-follow-the-csv": lambda p: _values(p, "dcgmExporter.config.name", "other"),
    "operands-enabled": lambda p: _values(p, "devicePlugin.enabled", False),
}


def test_every_rule_has_a_doctored_plan_that_breaks_it() -> None:
    assert set(DOCTORED) == set(RULE_IDS)


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_each_rule_holds_on_prod_and_fails_on_a_plan_broken_where_it_looks(rule_id: str) -> None:
    plan = render(_prod_parts())

    assert rule(rule_id).check(plan) == []
    broken = rule(rule_id).check(DOCTORED[rule_id](plan))
    assert broken and all(message.startswith("gpu-pool:") for message in broken)


@pytest.mark.parametrize("stack", ["prod", "minimal"])
def test_the_shipped_stacks_break_no_rule(stack: str) -> None:
    raw = {k.removeprefix("gpu-pool:"): v for k, v in read_stack_file(stack).items()}
    plan = render(parts_of(validate_stack(raw)))

    assert [r.id for r in RULES if r.check(plan)] == []


def test_the_rendered_values_are_the_ones_the_release_installs() -> None:
    parts = _prod_parts()
    assert parts.operator is not None and parts.kyverno is not None and parts.monitoring is not None

    assert render(parts).values == release_values(parts.operator, parts.kyverno, parts.monitoring)


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            "nvidia.com/gpu=true:NoSchedule",
            True,
        ),
        (
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            "nvidia.com/gpu=true:NoExecute",
            False,
        ),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, "nvidia.com/gpu=true:NoExecute", True),
        ({"key": "nvidia.com/gpu", "value": "yes"}, "nvidia.com/gpu=true:NoSchedule", False),
        ({"operator": "Exists"}, "gpu.example.com/x=1:NoSchedule", True),
        ({"key": "other", "operator": "Exists"}, "nvidia.com/gpu=true:NoSchedule", False),
    ],
    ids=["Exists, same effect", "another effect", "Equal without effect", "another value", "empty key", "another key"],
)
def test_tolerations_are_matched_as_kubernetes_matches_them(
    toleration: dict[str, str], taint: str, tolerated: bool
) -> None:
    assert tolerates(toleration, taint) is tolerated


# --- docs/traps.md names every rule, and only rules that exist -------------------------------------------------

TRAPS = (ROOT_DIR / "docs" / "traps.md").read_text(encoding="utf-8")
RULE_REFERENCE = re.compile(r"rule `(?P<id>[a-z0-9-]+)`")


def test_docs_traps_names_every_rule_of_the_invariant_pass_and_only_those() -> None:
    named = set(RULE_REFERENCE.findall(TRAPS))

    assert named == set(RULE_IDS)


def test_docs_traps_lists_each_rule_once_with_its_trap_statement_and_keys_as_the_code_states_them() -> None:
    section = TRAPS.split("## The rules on the rendered plan", 1)[1]
    rows = [
        [cell.strip() for cell in line.strip("|").split(" | ")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]
    listed = [(row[0].strip("`"), row[1], row[2], row[3]) for row in rows]

    assert listed == [(r.id, r.trap, r.statement, ", ".join(f"`{k}`" for k in r.keys) or "none") for r in RULES]
