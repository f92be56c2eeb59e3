"""Each floor's verdict on the shapes a broken operand really takes, and the trap and command it names."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from day2.doctor.operands import assess, driver_version, image_tag
from day2.doctor.sharing import profile_slots
from day2.doctor.traps import trap
from day2.doctor.walk import Diagnosis, diagnose
from day2.objects import Snapshot
from day2.pool import Domain, PoolFacts
from tests.day2.k8s_objects import dump
from tests.day2.operator_pods import DCGM_EXPORTER, DEVICE_PLUGIN, DRIVER, TOOLKIT, VALIDATOR, operand_pod, pod_name
from tests.day2.scenarios import NODES, gpu_node, healthy_pool, replaced, smoke_job, time_slicing_configmap

DC1 = NODES["dc1"]
DEFAULTS = PoolFacts()


def diagnosis(objects: list[dict[str, Any]], facts: PoolFacts = DEFAULTS) -> Diagnosis:
    return diagnose(Snapshot.from_items(dump(objects)["items"]), facts, DC1)


def broken(d: Diagnosis) -> tuple[str | None, str, tuple[str, ...], str]:
    floor = next(f for f in d.floors if f.ok is False)
    assert d.fix is not None
    return d.first_broken, floor.detail, d.fix.traps, d.fix.command


def test_a_driver_crashing_without_an_oom_kill_is_one_of_the_build_traps_read_in_its_log() -> None:
    floor, detail, traps, command = broken(diagnosis(replaced(healthy_pool(), operand_pod(DRIVER, DC1, "crashloop"))))

    assert floor == "driver" and "last exit 1 (Error), 7 restarts" in detail
    assert traps == (trap(2), trap(3), trap(4))
    assert command.endswith("-c nvidia-driver-ctr --previous")


def test_a_driver_manager_init_that_keeps_failing_is_read_in_its_own_log() -> None:
    pod = operand_pod(DRIVER, DC1, "init-crashloop", stuck_at=0)
    floor, detail, traps, command = broken(diagnosis(replaced(healthy_pool(), pod)))

    assert floor == "driver" and "init container k8s-driver-manager CrashLoopBackOff" in detail and traps == ()
    assert command.endswith("-c k8s-driver-manager --previous")


def test_a_driver_pod_still_building_is_not_ready_and_says_the_first_build_takes_minutes() -> None:
    floor, detail, traps, _ = broken(diagnosis(replaced(healthy_pool(), operand_pod(DRIVER, DC1, "not-ready"))))

    assert floor == "driver" and "not Ready" in detail and "takes minutes" in detail and traps == ()


def test_no_driver_pod_on_a_node_nfd_has_not_labelled_yet_is_nfds_first_scan() -> None:
    node = gpu_node("dc1", "a1000-x4")
    del node["metadata"]["labels"]["feature.node.kubernetes.io/pci-10de.present"]
    objects = [
        o
        for o in replaced(healthy_pool(), node)
        if o["metadata"].get("labels", {}).get("app") != DRIVER.app or o["spec"].get("nodeName") != DC1
    ]
    floor, detail, traps, command = broken(diagnosis(objects))

    assert floor == "driver" and detail.startswith("no nvidia-driver-daemonset pod for this node")
    assert traps == (trap(12),)
    assert command == "kubectl -n gpu-operator get daemonset nvidia-driver-daemonset -o wide"


def test_a_failed_driver_upgrade_label_breaks_the_driver_floor_even_with_the_pod_running() -> None:
    node = gpu_node("dc1", "a1000-x4")
    node["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    floor, detail, _, command = broken(diagnosis(replaced(healthy_pool(), node)))

    assert floor == "driver" and detail.endswith("nvidia.com/gpu-driver-upgrade-state=upgrade-failed")
    assert command.endswith("-c k8s-driver-manager")


def test_a_crashing_toolkit_is_the_runtime_or_kubearmor_trap() -> None:
    floor, _, traps, command = broken(diagnosis(replaced(healthy_pool(), operand_pod(TOOLKIT, DC1, "crashloop"))))

    assert floor == "toolkit" and traps == (trap(6), trap(8))
    assert command.endswith("-c nvidia-container-toolkit-ctr --previous")


def test_a_toolkit_waiting_in_driver_validation_points_at_that_init_containers_log() -> None:
    floor, detail, _, command = broken(diagnosis(replaced(healthy_pool(), operand_pod(TOOLKIT, DC1, "stuck-init"))))

    assert floor == "toolkit" and "Init:0/1, init container driver-validation running" in detail
    assert command.endswith("-c driver-validation")


def test_an_oom_killed_dcgm_exporter_is_trap_13() -> None:
    floor, _, traps, _ = broken(diagnosis(replaced(healthy_pool(), operand_pod(DCGM_EXPORTER, DC1, "oom-crashloop"))))

    assert floor == "dcgm-exporter" and traps == (trap(13),)


def test_a_missing_time_slicing_configmap_breaks_the_sharing_floor_and_pulumi_up_recreates_it() -> None:
    objects = [o for o in healthy_pool() if o["metadata"]["name"] != "time-slicing-config"]
    floor, detail, _, command = broken(diagnosis(objects, PoolFacts(stack="prod")))

    assert floor == "sharing-config" and "not found" in detail and command == "pulumi up --stack prod"


def test_a_configmap_profile_that_disagrees_with_the_stack_breaks_the_sharing_floor() -> None:
    facts = PoolFacts(profile_slots={"a1000-x4": 4, "whole": 1}, stack="prod")
    objects = replaced(healthy_pool(), time_slicing_configmap({"a1000-x4": 2, "whole": 1}))
    floor, detail, _, _ = broken(diagnosis(objects, facts))

    assert floor == "sharing-config"
    assert detail.endswith("gives 2 slots per card, the stack's sharingProfiles.a1000-x4 gives 4")


def test_a_node_advertising_more_than_its_profile_has_not_applied_the_profile_yet() -> None:
    floor, detail, traps, command = broken(diagnosis(replaced(healthy_pool(), gpu_node("dc1", "a1000-x4", gpus="1"))))

    assert floor == "gpu-capacity" and "has not applied the profile" in detail and traps == ()
    assert command.endswith("-c config-manager")


def test_a_smoke_job_still_running_is_not_a_pass() -> None:
    job = smoke_job("dc1", age=timedelta(minutes=3))
    job["status"] = {
        "active": 1,
        "ready": 1,
        "startTime": job["metadata"]["creationTimestamp"],
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    floor, detail, _, command = broken(diagnosis([*healthy_pool(), job]))

    assert floor == "smoke-test" and detail.endswith("not finished (1 active)")
    assert command.startswith("kubectl -n gpu-smoke-test get pods -l job-name=cuda-smoke-dc1-")


def test_a_node_without_any_smoke_job_is_not_proven() -> None:
    objects = [o for o in healthy_pool() if not o["metadata"]["name"].startswith("cuda-smoke-dc1")]
    floor, _, _, command = broken(diagnosis(objects))

    assert floor == "smoke-test" and command == "pulumi up"


def test_the_stacks_driver_pin_is_compared_with_the_running_driver() -> None:
    facts = PoolFacts(driver_version="580.173.02", domains=(Domain("dc1", DC1, "a1000-x4", 4),), stack="prod")
    d = diagnosis(healthy_pool(), facts)

    driver = next(f for f in d.floors if f.name == "driver")
    assert driver.ok and "the stack pins 580.173.02" in driver.detail


# --- the pure pieces -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "tag", "version"),
    [
        ("nvcr.io/nvidia/driver:570.211.01-ubuntu24.04", "570.211.01-ubuntu24.04", "570.211.01"),
        ("registry.lab:5000/nvidia/driver:580.173.02-ubuntu22.04@sha256:abc", "580.173.02-ubuntu22.04", "580.173.02"),
        ("nvcr.io/nvidia/driver", None, None),
    ],
)
def test_the_driver_version_is_read_from_the_image_tag_only(image: str, tag: str | None, version: str | None) -> None:
    pod = {"spec": {"containers": [{"name": "nvidia-driver-ctr", "image": image}]}}

    assert image_tag(pod, "nvidia-driver-ctr") == tag
    assert driver_version(pod, "nvidia-driver-ctr") == version


def test_an_image_that_cannot_be_pulled_is_described_not_logged() -> None:
    pod = operand_pod(TOOLKIT, DC1)
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}
    health = assess(pod, "gpu-operator", TOOLKIT.app, "nvidia-container-toolkit-ctr")

    assert health.problem == "image" and health.command.startswith("kubectl -n gpu-operator describe pod ")


@pytest.mark.parametrize(
    ("document", "slots"),
    [
        ("version: v1\nflags:\n  migStrategy: none\n", 1),
        (
            "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
            4,
        ),
        ("version: v2\n", None),
        ("{not yaml", None),
    ],
)
def test_a_profiles_slots_are_its_time_slicing_replicas_or_one_whole_card(document: str, slots: int | None) -> None:
    assert profile_slots(document) == slots


def test_the_programs_own_configmap_gives_the_slots_the_stack_promises() -> None:
    data = time_slicing_configmap()["data"]

    assert {name: profile_slots(text) for name, text in data.items()} == {"a1000-x4": 4, "whole": 1}


def test_a_ready_toolkit_with_a_failing_toolkit_validation_is_the_operator_validator_floor_not_the_device_plugin() -> (
    None
):
    """Held-out style: containerd never loaded the runtime or the CDI spec. The toolkit pod is Ready (it has no
    probe), the validator's toolkit-validation keeps failing, and the device plugin waits in its own
    toolkit-validation for the file the validator never writes."""
    objects = replaced(
        healthy_pool(),
        operand_pod(VALIDATOR, DC1, "init-crashloop", stuck_at=1),
        operand_pod(DEVICE_PLUGIN, DC1, "stuck-init"),
    )
    d = diagnosis(objects)
    floor, detail, traps, command = broken(d)

    assert floor == "operator-validator"
    assert next(f for f in d.floors if f.name == "toolkit").ok is True
    assert "init container toolkit-validation" in detail
    assert traps == (trap(6), trap(7), trap(9), trap(10))
    assert command == f"kubectl -n gpu-operator logs {pod_name(VALIDATOR, DC1)} -c toolkit-validation --previous"


def test_a_validator_waiting_in_plugin_validation_is_the_insufficient_gpu_trap() -> None:
    floor, detail, traps, command = broken(
        diagnosis(replaced(healthy_pool(), operand_pod(VALIDATOR, DC1, "stuck-init", stuck_at=3)))
    )
    assert floor == "operator-validator" and "Init:3/4, init container plugin-validation running" in detail
    assert traps == (trap(11),) and command.endswith("-c plugin-validation")
