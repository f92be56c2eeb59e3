"""The scenario objects are real: every one passes the Kubernetes 1.33 schema strictly, and what the tool reads
from them is what the program and the operator really set."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from components.gpu_failure_domain.smoke_test import build_smoke_job
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from config.smoke_test import SmokeTestConfig
from day2.pool import SMOKE_JOB_DOMAIN_LABEL, SMOKE_JOB_NAME, SMOKE_JOB_NAME_LABEL, PoolFacts
from knowledge import gpu_operator
from tests.day2.k8s_objects import KUBERNETES_VERSION
from tests.day2.operator_pods import DCGM_EXPORTER, DEVICE_PLUGIN, DRIVER, TOOLKIT
from tests.day2.scenarios import SCENARIOS, healthy_pool


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_object_of_the_scenario_is_valid_kubernetes_1_33_with_no_unknown_field(scenario: str) -> None:
    for obj in SCENARIOS[scenario]():
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_strict_schema_would_catch_an_invented_field() -> None:
    pod = copy.deepcopy(next(o for o in healthy_pool() if o["kind"] == "Pod"))
    pod["status"]["gpuHolder"] = True

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


def test_the_smoke_job_labels_the_tool_looks_for_are_the_ones_the_program_sets() -> None:
    job = build_smoke_job("dc1", SmokeTestConfig(), {"node": "rke2-worker-dc1-gpu-a"})

    assert job["metadata"]["labels"] == {SMOKE_JOB_NAME_LABEL: SMOKE_JOB_NAME, SMOKE_JOB_DOMAIN_LABEL: "dc1"}
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "rke2-worker-dc1-gpu-a"}


def test_the_tools_defaults_are_the_stack_configs_defaults() -> None:
    facts = PoolFacts()

    assert (facts.operator_namespace, facts.smoke_namespace) == ("gpu-operator", "gpu-smoke-test")
    assert facts.time_slicing_configmap == TIME_SLICING_CONFIGMAP
    assert (facts.marking.label_key, facts.marking.label_value, facts.marking.taint) == (
        "nodepool",
        "gpu",
        "nvidia.com/gpu=true:NoSchedule",
    )
    assert (facts.idle_hours, facts.idle_percent) == (24, 5)


def test_the_operand_names_in_knowledge_are_the_ones_the_scenarios_pods_carry() -> None:
    assert f"{gpu_operator.OPERAND_APP_LABEL}={gpu_operator.DRIVER_APP}" == gpu_operator.DRIVER_POD_SELECTOR
    pairs = [
        (DRIVER, gpu_operator.DRIVER_APP, gpu_operator.DRIVER_CONTAINER),
        (TOOLKIT, gpu_operator.TOOLKIT_APP, gpu_operator.TOOLKIT_CONTAINER),
        (DEVICE_PLUGIN, gpu_operator.DEVICE_PLUGIN_APP, gpu_operator.DEVICE_PLUGIN_CONTAINER),
        (DCGM_EXPORTER, gpu_operator.DCGM_EXPORTER_APP, gpu_operator.DCGM_EXPORTER_CONTAINER),
    ]
    for operand, app, main in pairs:
        assert (operand.app, operand.main[0]) == (app, main)
    assert DRIVER.init == (gpu_operator.DRIVER_MANAGER_INIT_CONTAINER,)
    assert gpu_operator.CONFIG_MANAGER_CONTAINER in DEVICE_PLUGIN.main
