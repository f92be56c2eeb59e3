"""The CPU guard (gpu-pool:kyverno.minCpuPerGpu), as the preview writes it, run by the real Kyverno engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.gpu_platform.cpu_guard_policy import POLICY_NAME as CPU_GUARD_POLICY_NAME
from components.gpu_platform.cpu_guard_policy import RULE_NAME as CPU_GUARD_RULE
from offline.runner import PROJECT, read_stack_file
from tests.e2e.kube import Kubectl, rejections
from tests.e2e.kyverno_cases import USER_NAMESPACE, Runs, cpu_guard_pods, policy_path, the_policy
from tests.e2e.kyverno_cli import FAIL, PASS, SKIP, Applied
from tests.e2e.match_conditions import Probe, ensure_pod_namespace, webhook_rule
from tests.e2e.stacks import Previewed, run_preview

# --------------------------------------------------------------------------------------------------------
# The CPU guard (gpu-pool:kyverno.minCpuPerGpu), an Audit validate rule
# --------------------------------------------------------------------------------------------------------

MIN_CPU_PER_GPU = "1"


def preview_with_guard(minimum: str, work: Path) -> Previewed:
    """prod with `gpu-pool:kyverno.minCpuPerGpu` set: the guard as the program writes it when a lab turns it on."""
    raw = read_stack_file("prod")
    # The ClusterPolicy twin (Kyverno < 1.17); the ValidatingPolicy is test_kyverno_cel_policies.py's.
    raw[f"{PROJECT}:kyverno"] = {
        **raw.get(f"{PROJECT}:kyverno", {}),
        "minCpuPerGpu": minimum,
        "policyApi": "clusterpolicy",
    }
    return run_preview(f"e2e-cpu-guard-{minimum}", raw, work)


@pytest.fixture(scope="module")
def cpu_guard_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    return preview_with_guard(MIN_CPU_PER_GPU, tmp_path_factory.mktemp("cpu-guard"))


@pytest.fixture(scope="module")
def guarded(cpu_guard_stack: Previewed, runs: Runs) -> Applied:
    return runs.guarded(cpu_guard_stack)


def guard_result(applied: Applied, name: str) -> str | None:
    """The guard's result for one pod, or None when its rule never matched the pod."""
    results = applied.rules("Pod", name, cpu_guard_pods()[name]["metadata"]["namespace"])
    assert set(results) <= {CPU_GUARD_RULE}, results
    return results.get(CPU_GUARD_RULE)


@pytest.mark.parametrize(
    ("name", "result"),
    [
        ("notebook-1-gpu-600m", FAIL),
        ("trainer-2-gpus-2-cpus", PASS),
        ("trainer-2-gpus-1500m", FAIL),
        ("trainer-2-gpus-3-cpus", PASS),
        ("split-1-gpu-600m-and-400m", PASS),
        ("split-2-gpus-1500m", FAIL),
    ],
)
def test_a_gpu_pod_fails_the_cpu_guard_exactly_when_it_requests_less_than_one_cpu_per_gpu(
    guarded: Applied, name: str, result: str
) -> None:
    assert guard_result(guarded, name) == result


@pytest.mark.parametrize("name", ["no-gpu-100m", "gpu-only-in-init"])
def test_a_pod_whose_app_containers_ask_for_no_gpu_is_skipped_by_the_cpu_guard(guarded: Applied, name: str) -> None:
    assert guard_result(guarded, name) == SKIP


def test_a_gpu_pod_in_an_excluded_namespace_is_not_judged_by_the_cpu_guard(guarded: Applied) -> None:
    assert guard_result(guarded, "gpu-in-kube-system-100m") is None


def test_the_cpu_guard_only_audits_so_failing_pods_are_reported_and_nothing_is_changed(guarded: Applied) -> None:
    # Audit: the CLI reports the failures (exit 1, "policy violations"); a validate rule writes no mutated pods.
    assert guarded.returncode == 1
    assert not list(guarded.out.glob("*-mutated.yaml"))


def test_the_cpu_guard_says_what_the_pod_asks_for_and_what_it_should_request(guarded: Applied) -> None:
    message = guarded.messages("Pod", "notebook-1-gpu-600m", USER_NAMESPACE)[CPU_GUARD_RULE]
    assert message == (
        "asks for 1 nvidia.com/gpu but requests 600m CPU; a GPU pod should request at least 1 CPU per GPU (1), "
        "or it holds a whole card it cannot feed"
    )


def test_the_api_server_sends_the_cpu_guard_only_gpu_pods_outside_the_excluded_namespaces(
    cpu_guard_stack: Previewed, kubectl: Kubectl
) -> None:
    pods = cpu_guard_pods()
    for name in sorted({p["metadata"]["namespace"] for p in pods.values()}):
        ensure_pod_namespace(kubectl, name)
    probe = Probe(kubectl)
    policy = the_policy(policy_path(cpu_guard_stack, CPU_GUARD_POLICY_NAME))
    with probe.webhook(policy, [webhook_rule("pods", "CREATE")], control=pods["notebook-1-gpu-600m"]):
        sent = {name: probe.create_reaches_kyverno(p) for name, p in pods.items()}
    not_sent = {"no-gpu-100m", "gpu-in-kube-system-100m"}
    assert sent == {name: name not in not_sent for name in pods}


def test_the_cpu_guard_uses_the_configured_minimum_even_in_millicores(
    runs: Runs, tmp_path_factory: pytest.TempPathFactory
) -> None:
    applied = runs.guarded(preview_with_guard("1500m", tmp_path_factory.mktemp("cpu-guard-1500m")))
    # 2 GPUs need 3 CPUs now: 2 CPUs are not enough, 3 are.
    assert guard_result(applied, "trainer-2-gpus-2-cpus") == FAIL
    assert guard_result(applied, "trainer-2-gpus-3-cpus") == PASS
    assert guard_result(applied, "split-1-gpu-600m-and-400m") == FAIL
    message = applied.messages("Pod", "trainer-2-gpus-2-cpus", USER_NAMESPACE)[CPU_GUARD_RULE]
    assert "requests 2 CPU; a GPU pod should request at least 1500m CPU per GPU (3)" in message


@pytest.mark.usefixtures("crds")
def test_the_api_server_accepts_the_cpu_guard_policy_as_written(cpu_guard_stack: Previewed, kubectl: Kubectl) -> None:
    # prod leaves the guard off, so the stack-manifest dry runs never send it: Kyverno's CRD judges it here.
    path = policy_path(cpu_guard_stack, CPU_GUARD_POLICY_NAME)
    problems = rejections([(path.name, kubectl.server_side_apply(path, dry_run=True))])
    assert not problems, "\n".join(problems)
