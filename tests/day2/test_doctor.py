"""`doctor`: the floors of a GPU node, bottom up, stopping at the first broken one (debug from the driver up)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from day2.doctor.traps import TIME_SLICING_ORDER, other_trap, trap
from day2.doctor.walk import FLOOR_NAMES, NOT_CHECKED, Diagnosis, diagnose, diagnose_all, gpu_nodes
from day2.objects import Snapshot
from day2.pool import PoolFacts, load_stack
from tests.day2.k8s_objects import dump
from tests.day2.scenarios import (
    NODES,
    broken_driver,
    failed_smoke,
    gpu_node,
    healthy_pool,
    missing_profile,
    replaced,
    untolerated_device_plugin,
    zero_gpus,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = PoolFacts()


def snapshot_of(objects: list[dict[str, Any]]) -> Snapshot:
    return Snapshot.from_items(dump(objects)["items"])


@pytest.fixture(scope="module")
def prod() -> PoolFacts:
    return load_stack("prod", ROOT)


def floors(d: Diagnosis) -> dict[str, bool | None]:
    return {f.name: f.ok for f in d.floors}


def detail(d: Diagnosis, floor: str) -> str:
    return next(f.detail for f in d.floors if f.name == floor)


def assert_stops_at(d: Diagnosis, floor: str) -> None:
    """Every floor below is ok, the floor is broken, and nothing above it was checked."""
    index = FLOOR_NAMES.index(floor)
    states = [f.ok for f in d.floors]
    assert [f.name for f in d.floors] == list(FLOOR_NAMES)
    assert states == [True] * index + [False] + [None] * (len(FLOOR_NAMES) - index - 1), floors(d)
    assert d.first_broken == floor
    assert all(f.detail == NOT_CHECKED for f in d.floors[index + 1 :])


def test_every_floor_of_every_node_of_a_healthy_pool_is_ok(prod: PoolFacts) -> None:
    for facts in (DEFAULTS, prod):
        diagnoses = diagnose_all(snapshot_of(healthy_pool()), facts)

        assert [d.node for d in diagnoses] == sorted(NODES.values())
        assert all(d.healthy and d.fix is None and set(floors(d).values()) == {True} for d in diagnoses)


def test_the_healthy_driver_floor_names_the_driver_version_from_the_image_tag() -> None:
    d = diagnose(snapshot_of(healthy_pool()), DEFAULTS, NODES["dc1"])

    assert detail(d, "driver").endswith("Running, Ready, driver 570.211.01")


def test_a_crash_looping_driver_is_named_not_the_device_plugin_stuck_in_init_above_it() -> None:
    d = diagnose(snapshot_of(broken_driver()), DEFAULTS, NODES["dc2"])

    assert_stops_at(d, "driver")
    assert "nvidia-driver-ctr CrashLoopBackOff, last exit 137 (OOMKilled), 14 restarts" in detail(d, "driver")
    assert d.fix is not None and d.fix.traps == (trap(1),) == ("trap 1: The driver gets OOM-killed, exit 137",)
    assert d.fix.command.startswith("kubectl -n gpu-operator logs nvidia-driver-daemonset-")
    assert d.fix.command.endswith(" -c nvidia-driver-ctr --previous")


def test_the_other_nodes_of_a_pool_with_one_broken_driver_stay_healthy() -> None:
    diagnoses = {d.node: d for d in diagnose_all(snapshot_of(broken_driver()), DEFAULTS)}

    assert {n for n, d in diagnoses.items() if d.healthy} == {NODES["dc1"], NODES["dc3"]}


def test_a_node_labelled_with_a_profile_missing_from_the_configmap_breaks_the_sharing_config_floor() -> None:
    d = diagnose(snapshot_of(missing_profile()), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "sharing-config")
    assert "profile a1000-x8" in detail(d, "sharing-config") and "keys: a1000-x4, whole" in detail(d, "sharing-config")
    # The table's row for it: a label naming a missing profile takes the card from 1 schedulable GPU to 0.
    assert d.fix is not None and d.fix.traps == (other_trap(TIME_SLICING_ORDER),)
    assert d.fix.command == f"kubectl label node {NODES['dc1']} nvidia.com/device-plugin.config=<profile> --overwrite"


def test_a_pool_whose_stack_turns_the_smoke_test_off_is_healthy_without_smoke_jobs() -> None:
    objects = [obj for obj in healthy_pool() if obj["kind"] != "Job"]
    facts = PoolFacts(smoke_test_enabled=False, stack="lab")

    diagnoses = diagnose_all(snapshot_of(objects), facts)

    assert diagnoses and all(d.healthy for d in diagnoses)
    assert "off in stack lab (gpu-pool:smokeTest.enabled: false)" in detail(diagnoses[0], "smoke-test")
    # With the smoke test on, the same pool lacks its proof on every node.
    assert not any(d.healthy for d in diagnose_all(snapshot_of(objects), PoolFacts(stack="lab")))


def test_with_the_stack_the_same_node_is_caught_one_floor_lower_by_its_label_and_the_fix_names_the_profile(
    prod: PoolFacts,
) -> None:
    d = diagnose(snapshot_of(missing_profile()), prod, NODES["dc1"])

    assert_stops_at(d, "labels")
    assert detail(d, "labels") == "nvidia.com/device-plugin.config is a1000-x8, the stack says a1000-x4"
    assert d.fix is not None
    assert d.fix.command == f"kubectl label node {NODES['dc1']} nvidia.com/device-plugin.config=a1000-x4 --overwrite"


def test_a_node_advertising_0_gpus_with_every_operand_running_breaks_the_capacity_floor() -> None:
    d = diagnose(snapshot_of(zero_gpus()), DEFAULTS, NODES["dc3"])

    assert_stops_at(d, "gpu-capacity")
    assert detail(d, "gpu-capacity").startswith("allocatable nvidia.com/gpu is 0, profile whole gives 1")
    assert d.fix is not None and d.fix.traps == (trap(11),)
    assert d.fix.command.endswith(" -c nvidia-device-plugin")


def test_a_failed_newest_smoke_job_breaks_the_top_floor_even_though_an_older_one_passed() -> None:
    d = diagnose(snapshot_of(failed_smoke()), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "smoke-test")
    assert "Failed (BackoffLimitExceeded: Job has reached the specified backoff limit)" in detail(d, "smoke-test")
    assert d.fix is not None and d.fix.command.startswith("kubectl -n gpu-smoke-test logs job/cuda-smoke-dc1-")
    assert [t.split(":")[0] for t in d.fix.traps] == ["trap 7", "trap 8", "trap 9", "trap 10"]


def test_of_two_smoke_jobs_created_in_the_same_second_the_one_that_started_later_counts() -> None:
    objects = failed_smoke()
    jobs = [o for o in objects if o["kind"] == "Job" and "-dc1-" in o["metadata"]["name"]]
    for job in jobs:  # creationTimestamp has whole seconds: a real server often gives both the same
        job["metadata"]["creationTimestamp"] = "2026-05-04T09:00:00Z"
    failed = next(j for j in jobs if any(c["type"] == "Failed" for c in j["status"].get("conditions", [])))
    for job in jobs:  # whichever name sorts last, the later start decides
        job["metadata"]["name"] = "cuda-smoke-dc1-a" if job is failed else "cuda-smoke-dc1-z"

    d = diagnose(snapshot_of(objects), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "smoke-test")
    assert detail(d, "smoke-test").startswith("cuda-smoke-dc1-a: Failed")


def test_a_device_plugin_pending_on_the_untolerated_gpu_taint_is_trap_11() -> None:
    d = diagnose(snapshot_of(untolerated_device_plugin()), DEFAULTS, NODES["dc3"])

    assert_stops_at(d, "device-plugin")
    assert "had untolerated taint {nvidia.com/gpu: true}" in detail(d, "device-plugin")
    assert d.fix is not None and d.fix.traps == (trap(11),)
    assert d.fix.command.startswith("kubectl -n gpu-operator describe pod nvidia-device-plugin-daemonset-")


def test_a_node_that_is_not_in_the_cluster_breaks_the_first_floor(prod: PoolFacts) -> None:
    objects = [o for o in healthy_pool() if o["metadata"]["name"] != NODES["dc2"]]
    d = diagnose(snapshot_of(objects), prod, NODES["dc2"])

    assert_stops_at(d, "node")
    assert detail(d, "node") == f"no node named {NODES['dc2']} in the cluster (the stack's domain dc2 expects it)"


def test_without_a_node_name_the_stacks_nodes_are_walked_even_when_one_is_missing(prod: PoolFacts) -> None:
    objects = [o for o in healthy_pool() if o["metadata"]["name"] != NODES["dc2"]]

    assert gpu_nodes(snapshot_of(objects), DEFAULTS) == [NODES["dc1"], NODES["dc3"]]
    assert gpu_nodes(snapshot_of(objects), prod) == sorted(NODES.values())


def test_a_not_ready_node_breaks_the_node_floor() -> None:
    objects = replaced(healthy_pool(), gpu_node("dc1", "a1000-x4", ready=False))
    d = diagnose(snapshot_of(objects), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "node")
    assert detail(d, "node") == "not Ready (Ready=False, NodeStatusUnknown: Kubelet stopped posting node status.)"


def test_a_node_without_the_gpu_taint_breaks_the_taint_floor_and_the_fix_sets_it() -> None:
    untainted = gpu_node("dc1", "a1000-x4")
    del untainted["spec"]["taints"]
    d = diagnose(snapshot_of(replaced(healthy_pool(), untainted)), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "taint")
    assert d.fix is not None
    assert d.fix.command == f"kubectl taint node {NODES['dc1']} nvidia.com/gpu=true:NoSchedule --overwrite"


def _first_boot(objects: list[dict[str, Any]], node: str, record: str) -> list[dict[str, Any]]:
    [found] = [o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == node]
    found["metadata"].setdefault("annotations", {})["gpu-pool.dev/first-boot"] = record
    return objects


def test_a_first_boot_that_left_a_step_undone_is_the_last_floor_with_the_step_its_error_and_its_log() -> None:
    steps = [
        {"step": "packages", "essential": False, "exit": 0, "attempts": 1, "url": "", "error": ""},
        {"step": "hold-kernel", "essential": False, "exit": 100, "attempts": 1, "url": "", "error": "E: no such"},
        {"step": "rke2-agent", "essential": True, "exit": 0, "attempts": 1, "url": "", "error": ""},
    ]
    objects = _first_boot(healthy_pool(), NODES["dc1"], json.dumps({"steps": steps}))

    d = diagnose(snapshot_of(objects), DEFAULTS, NODES["dc1"])

    assert_stops_at(d, "first-boot")
    assert detail(d, "first-boot").startswith("first boot: hold-kernel failed (exit 100): E: no such; the node joined")
    assert f"kubectl annotate node {NODES['dc1']} gpu-pool.dev/first-boot-" in detail(d, "first-boot")
    assert (
        d.fix is not None
        and d.fix.command == f"ssh {NODES['dc1']} sudo cat /var/lib/gpu-pool/first-boot/hold-kernel.log"
    )


@pytest.mark.parametrize("record", [json.dumps({"steps": [{"step": "packages", "exit": 0}]}), "", "not json"])
def test_a_first_boot_that_did_everything_or_left_no_record_keeps_the_node_healthy(record: str) -> None:
    d = diagnose(snapshot_of(_first_boot(healthy_pool(), NODES["dc1"], record)), DEFAULTS, NODES["dc1"])

    assert d.healthy
