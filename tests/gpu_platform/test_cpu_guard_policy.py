"""The optional CPU-per-GPU audit policy: off unless asked for, Audit only, sent only GPU pods, counting GPUs right.

Its quantity arithmetic (Kyverno's sum and multiply of CPU quantities) exists only in Kyverno: the e2e tier runs the
policy through the real Kyverno CLI (tests/e2e/test_kyverno_cpu_guard.py). Here: its shape, where it is sent, and
the GPU count, which uses only standard JMESPath functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jmespath
import pytest

from components.gpu_platform.cluster_preflight import needed_crds
from components.gpu_platform.cpu_guard_policy import POLICY_NAME, build_cpu_guard_policy, gpu_count_expression
from components.stack_check import validate_stack
from config.kyverno import KyvernoConfig
from offline.recording import Recording
from tests.gpu_platform.kyverno_admission import container, pod, pod_request, webhook_called

Run = Callable[..., Recording]
OPERATOR_NAMESPACE = "gpu-operator"


def guard(**config: Any) -> dict[str, Any]:
    policy = build_cpu_guard_policy(
        KyvernoConfig.model_validate({"minCpuPerGpu": "1", **config}), operator_namespace=OPERATOR_NAMESPACE
    )
    assert policy is not None
    return policy


def test_there_is_no_cpu_guard_unless_min_cpu_per_gpu_is_set() -> None:
    assert build_cpu_guard_policy(KyvernoConfig(), operator_namespace=OPERATOR_NAMESPACE) is None


def test_prod_registers_no_cpu_guard_and_setting_the_key_registers_it(run_stack_program: Run, prod_config):
    assert not [r for r in run_stack_program(prod_config).registrations if r.name.endswith("cpu-guard-policy")]

    prod_config["gpu-pool:kyverno"] = {"minCpuPerGpu": "1500m"}
    policy = run_stack_program(prod_config).named("gpu-platform-gpu-cpu-guard-policy")
    assert policy.inputs["metadata"]["name"] == POLICY_NAME
    assert "1500m" in policy.inputs["spec"]["validations"][0]["messageExpression"]


def test_the_guard_audits_and_never_refuses_a_pod() -> None:
    spec = guard()["spec"]
    (rule,) = spec["rules"]
    assert rule["validate"]["failureAction"] == "Audit"
    assert "validationFailureAction" not in spec
    # Kyverno down must not hold GPU pods back either.
    assert spec["webhookConfiguration"]["failurePolicy"] == "Ignore"


def test_the_guard_also_reports_pods_that_ran_before_it_existed() -> None:
    spec = guard()["spec"]
    assert (spec["background"], spec["admission"]) == (True, True)


def test_autogen_is_off_so_the_report_names_the_pod_not_a_rewritten_controller() -> None:
    assert guard()["metadata"]["annotations"]["pod-policies.kyverno.io/autogen-controllers"] == "none"


@pytest.mark.parametrize(
    ("shape", "the_pod", "namespace", "sent"),
    [
        ("a notebook with one GPU", pod(container(gpu="1")), "team-vision", True),
        ("a pod without GPUs", pod(container()), "team-vision", False),
        ("a pod asking for 0 GPUs", pod(container(gpu="0")), "team-vision", False),
        ("the operator's validator", pod(container(gpu="1")), OPERATOR_NAMESPACE, False),
        ("a GPU pod in kube-system", pod(container(gpu="1")), "kube-system", False),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_api_server_sends_kyverno_only_gpu_pods_outside_the_excluded_namespaces(
    shape: str, the_pod: dict[str, Any], namespace: str, sent: bool
) -> None:
    request = pod_request(the_pod, namespace=namespace)
    assert webhook_called(guard(), request) is sent, shape


@pytest.mark.parametrize(
    ("containers", "gpus"),
    [
        ([container()], 0),
        ([container(gpu="0")], 0),
        ([container(gpu="1")], 1),
        ([container("a", gpu="1"), container("b", gpu="2"), container("c")], 3),
    ],
    ids=["none", "zero", "one", "summed over containers"],
)
def test_the_gpu_count_sums_the_app_containers_limits(containers: list[dict[str, Any]], gpus: int) -> None:
    request = pod_request(pod(*containers))
    assert jmespath.search(gpu_count_expression("nvidia.com/gpu"), {"request": request}) == gpus


def test_the_rule_only_judges_pods_that_ask_for_gpus_in_their_app_containers() -> None:
    (rule,) = guard()["spec"]["rules"]
    (precondition,) = rule["preconditions"]["all"]
    assert precondition["key"] == "{{ " + gpu_count_expression("nvidia.com/gpu") + " }}"
    assert (precondition["operator"], precondition["value"]) == ("GreaterThan", 0)


@pytest.mark.parametrize("wrong", ["0", "-1", "one", "1.5 cores"])
def test_a_min_cpu_per_gpu_that_is_not_a_positive_cpu_quantity_is_refused_naming_the_key(
    run_stack_program: Run, prod_config, monitor, wrong: str
) -> None:
    prod_config["gpu-pool:kyverno"] = {"minCpuPerGpu": wrong}
    with pytest.raises(Exception, match=r"gpu-pool:kyverno\.minCpuPerGpu: .*(cpu quantity|above zero)"):
        run_stack_program(prod_config)
    assert monitor.recording.registrations == []


def test_the_guard_alone_needs_kyvernos_crd_at_preflight(prod_config) -> None:
    prod_config["gpu-pool:kyverno"] = {"enabled": False, "minCpuPerGpu": "1"}
    prod_config["gpu-pool:gpuQuotas"] = {}
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    (kyverno,) = [crd for crd in needed_crds(cfg) if crd.name == "validatingpolicies.policies.kyverno.io"]
    assert kyverno.why == "gpu-pool:kyverno.minCpuPerGpu is set (the CPU audit policy)"
