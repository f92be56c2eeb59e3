"""`make diff` plans a wave, one domain at a time, for every input that renders into the GPU Operator's driver
DaemonSet's pod template (knowledge/driver_template.py), and none for what does not (FIELD-REVIEW-6 WRONG-1): with
`maxUnavailable: "0"` the operator moves only a cordoned node, so a template change without a wave leaves every GPU
node in upgrade-required."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import ROLLOUT_ANNOTATION
from offline.diff import compare_configs, settled_nodes
from tests.lab_ca import make_lab_ca
from tests.offline.test_waves import prod

Config = dict[str, Any]
Edit = Callable[[Config, Path], None]
PROXY = "http://proxy.lab.internal:3128"


def _operator(**values: Any) -> Edit:
    def edit(config: Config, _: Path) -> None:
        config["gpu-pool:gpuOperator"].update(copy.deepcopy(values))

    return edit


def _extra(section: str, value: Any) -> Edit:
    def edit(config: Config, _: Path) -> None:
        config["gpu-pool:gpuOperator"].setdefault("extraValues", {})[section] = copy.deepcopy(value)

    return edit


def _top(key: str, value: Any) -> Edit:
    def edit(config: Config, _: Path) -> None:
        config[key] = copy.deepcopy(value)

    return edit


def _trusted_ca(name: str) -> Edit:
    def edit(config: Config, folder: Path) -> None:
        config["gpu-pool:trustedCa"] = make_lab_ca(folder / name, name).pem

    return edit


def _chart_bump(config: Config, _: Path) -> None:
    # The documented 26.3 -> 26.7 upgrade with the driver kept: a driver both charts list.
    config["gpu-pool:gpuOperator"].update({"chartVersion": "v26.7.0", "driverVersion": "580.173.02"})


def _on_26_3(config: Config, _: Path) -> None:
    config["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "580.173.02"})


def _taint(config: Config, _: Path) -> None:
    # The GPU nodes' taint is what the operands' tolerations are derived from (release_values.gpu_node_tolerations).
    config.setdefault("gpu-pool:kyverno", {})["taintKey"] = "gpu.lab.internal/dedicated"


def _nothing(config: Config, _: Path) -> None:
    return None


# (the input of issue 47's item 1, the stack before, the stack after): each rewrites the driver's pod template.
TEMPLATE_INPUTS: list[tuple[str, Edit, Edit]] = [
    ("chart version, driver kept (v26.3.2 -> v26.7.0)", _on_26_3, _chart_bump),
    ("kernelModuleType", _nothing, _operator(kernelModuleType="proprietary")),
    # Precompiled drivers are pinned by branch ("580"), so the version record moves with it: a driver turn.
    ("usePrecompiled", _nothing, _operator(usePrecompiled=True, driverVersion="580", kernelModuleType="open")),
    ("driver resources", _nothing, _operator(driverResources={"limits": {"cpu": "2", "memory": "6Gi"}})),
    ("driver env", _nothing, _extra("driver", {"env": [{"name": "NVIDIA_LOG_LEVEL", "value": "debug"}]})),
    ("the proxy's driver env", _nothing, _top("gpu-pool:proxy", {"https": PROXY})),
    ("repoConfig (an apt mirror)", _nothing, _top("gpu-pool:aptMirror", {"uri": "http://apt.lab.internal/ubuntu"})),
    (
        "the apt sources' content (another mirror)",
        _top("gpu-pool:aptMirror", {"uri": "http://apt.lab.internal/ubuntu"}),
        _top("gpu-pool:aptMirror", {"uri": "http://apt2.lab.internal/ubuntu"}),
    ),
    ("certConfig (a lab CA)", _nothing, _trusted_ca("lab-ca")),
    ("the CA's content (a CA rotation)", _trusted_ca("lab-ca"), _trusted_ca("lab-ca-2026")),
    ("secretEnv", _nothing, _extra("driver", {"secretEnv": "driver-secrets"})),
    (
        "the driver manager's env",
        _nothing,
        _extra("driver", {"manager": {"env": [{"name": "DRAIN_USE_FORCE", "value": "true"}]}}),
    ),
    ("extraValues.driver.* (startupProbe)", _nothing, _extra("driver", {"startupProbe": {"failureThreshold": 240}})),
    ("daemonsets tolerations, from the GPU taint", _nothing, _taint),
    ("daemonsets.priorityClassName", _nothing, _extra("daemonsets", {"priorityClassName": "gpu-operands"})),
    ("daemonsets.labels", _nothing, _extra("daemonsets", {"labels": {"team": "ml-platform"}})),
    ("driver.hostNetwork", _nothing, _extra("driver", {"hostNetwork": True})),
    ("driver.rdma", _nothing, _extra("driver", {"rdma": {"enabled": True}})),
    ("gds.*", _nothing, _extra("gds", {"enabled": True})),
    ("gdrcopy.*", _nothing, _extra("gdrcopy", {"enabled": True})),
]

# What the operator renders elsewhere: never a driver wave.
NOT_TEMPLATE_INPUTS: list[tuple[str, Edit]] = [
    ("the DCGM exporter's resources", _operator(dcgmExporterResources={"limits": {"memory": "2Gi"}})),
    (
        "the DCGM exporter's values",
        _extra("dcgmExporter", {"env": [{"name": "DCGM_EXPORTER_INTERVAL", "value": "10000"}]}),
    ),
    ("the device plugin's values", _extra("devicePlugin", {"env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}]})),
    ("the toolkit's values", _extra("toolkit", {"resources": {"limits": {"memory": "512Mi"}}})),
    (
        "the driver's upgrade policy (the upgrade controller's, not the template)",
        _extra("driver", {"upgradePolicy": {"drain": {"enable": False}}}),
    ),
]


def _configs(tmp_path: Path, before_edit: Edit, after_edit: Edit) -> tuple[Config, Config]:
    before = prod()
    before_edit(before, tmp_path)
    after = copy.deepcopy(before)
    after_edit(after, tmp_path)
    return before, after


@pytest.mark.parametrize(("what", "before_edit", "after_edit"), TEMPLATE_INPUTS, ids=[t[0] for t in TEMPLATE_INPUTS])
def test_make_diff_plans_a_driver_template_turn_on_every_domain_one_at_a_time_for(
    what: str, before_edit: Edit, after_edit: Edit, tmp_path: Path
) -> None:
    before, after = _configs(tmp_path, before_edit, after_edit)
    comparison = compare_configs("prod", before, after)
    assert comparison.wave is not None, f"{what}: no wave"
    assert comparison.wave.batches == [["dc1"], ["dc2"], ["dc3"]]
    for name, turn in comparison.wave.domains.items():
        expected = "driver" if what == "usePrecompiled" else "driver-template"
        assert turn.turn == "roll" and expected in turn.changes, (what, name, turn)
        steps = [step for step, _ in turn.steps]
        assert steps[steps.index("wave-drain") :][-2:] == ["wave-gate", "rollout"], (what, name, steps)
    assert comparison.wave.domains["dc2"].waits_for == ["dc1"] and comparison.wave.domains["dc3"].waits_for == ["dc2"]
    release = next(c for c in comparison.changes if c.name == "gpu-platform-gpu-operator")
    assert what in (
        "usePrecompiled",
        "the CA's content (a CA rotation)",
        "the apt sources' content (another mirror)",
    ) or any("driver DaemonSet" in i and "replaces a driver pod only on a cordoned node" in i for i in release.info), (
        what,
        release.info,
    )
    # Each domain out in its turn alone: the capacity timeline shows the wave.
    assert [point["out"] for point in comparison.wave.capacity] == [[], ["dc1"], ["dc2"], ["dc3"], []]


@pytest.mark.parametrize(("what", "edit"), NOT_TEMPLATE_INPUTS, ids=[t[0] for t in NOT_TEMPLATE_INPUTS])
def test_make_diff_plans_no_driver_wave_for(what: str, edit: Edit, tmp_path: Path) -> None:
    before, after = _configs(tmp_path, _nothing, edit)
    comparison = compare_configs("prod", before, after)
    release = next(c for c in comparison.changes if c.name == "gpu-platform-gpu-operator")
    assert release.op == "update", f"{what}: the release did not change, the test proves nothing"
    assert comparison.wave is None or not comparison.wave.batches, (what, comparison.wave)


def test_a_driver_version_change_is_one_turn_named_after_the_driver_not_two() -> None:
    after = prod()
    after["gpu-pool:gpuOperator"]["driverVersion"] = "580.173.02"
    comparison = compare_configs("prod", prod(), after)
    assert comparison.wave is not None
    assert {name: turn.changes for name, turn in comparison.wave.domains.items()} == {
        name: ["driver"] for name in ("dc1", "dc2", "dc3")
    }


# --- the upgrade from a gpu-pool that recorded the driver version only (issue 47 item 4) ---------------------------


def _version_only(config: Config) -> dict[str, Any]:
    """The Nodes the stack's `up` left under a gpu-pool from before the driver template's digest: the same record
    without its `driver-template` key."""
    nodes = settled_nodes(config)
    for item in nodes["items"]:
        annotations = item["metadata"]["annotations"]
        record = json.loads(annotations[ROLLOUT_ANNOTATION])
        del record["driver-template"]
        annotations[ROLLOUT_ANNOTATION] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return nodes


def test_the_upgrade_from_version_only_records_turns_no_domain_and_make_diff_says_why() -> None:
    config = prod()
    comparison = compare_configs("prod", config, copy.deepcopy(config), nodes=_version_only(config))
    assert comparison.wave is None or not comparison.wave.batches
    assert [i for i in comparison.nodes_info if "record the driver version only" in i] == [
        "dc1, dc2, dc3 record the driver version only (written by a gpu-pool from before the driver template's "
        "digest): they are taken as rolled to this stack's driver template; this gpu-pool changes nothing in the "
        "driver DaemonSet of this stack, so the upgrade alone turns no domain, and each domain's rollout step records "
        "the digest in this `up`. A chart or driver-values change made in this same `up` would not be planned as a "
        "wave: make it in the next one"
    ]


def test_the_upgrade_from_version_only_records_of_a_stack_with_an_apt_mirror_is_one_wave_that_says_why(
    tmp_path: Path,
) -> None:
    config = prod()
    config["gpu-pool:aptMirror"] = {"uri": "http://apt.lab.internal/ubuntu"}
    comparison = compare_configs("prod", config, copy.deepcopy(config), nodes=_version_only(config))
    assert comparison.wave is not None and comparison.wave.batches == [["dc1"], ["dc2"], ["dc3"]]
    for turn in comparison.wave.domains.values():
        assert turn.changes == ["driver-template"] and "this wave runs once, for the upgrade of gpu-pool" in turn.why
    assert any("one wave runs for the upgrade itself" in i for i in comparison.nodes_info)


def test_the_wave_gate_of_a_driver_turn_waits_for_a_replaced_driver_pod_and_of_another_turn_does_not() -> None:
    from components.gpu_failure_domain.observed import ObservedNode
    from components.gpu_failure_domain.plan import plan_domain, turn_for
    from components.gpu_failure_domain.rollout import rollout_state
    from components.gpu_failure_domain.steps import LocalStep
    from offline.diff import _stack_config

    before, after = prod(), prod()
    after["gpu-pool:gpuOperator"]["kernelModuleType"] = "open"
    old, new = _stack_config(before), _stack_config(after)
    bumped = prod()
    bumped["gpu-pool:rke2"]["version"] = "v1.33.6+rke2r1"
    rke2 = _stack_config(bumped)
    for stack, fresh in ((new, True), (rke2, False)):
        domain = stack.failure_domains[0]
        seen = ObservedNode(rollout=rollout_state(old.failure_domains[0], old), kubelet_version=old.rke2.version)
        plan = plan_domain(domain, stack, turn_for(domain, stack, seen))
        gate = plan.step_of("wave-gate", LocalStep)
        assert ("FRESH_DRIVER" in gate.command.environment) is fresh, plan.turn.changes
        drain = plan.step_of("wave-drain", LocalStep)
        assert drain.command.environment["OPERATOR_NAMESPACE"] == stack.gpu_operator.namespace
