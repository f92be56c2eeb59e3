"""prod's Kyverno CEL policies (MutatingPolicy, GeneratingPolicy, ValidatingPolicy), run by the real Kyverno CLI and
checked by the real API server: the same behaviour as their ClusterPolicy twins, case by case.

The twins are prod with `kyverno.policyApi: clusterpolicy` (the `clusterpolicy_stack`), whose behaviour
test_kyverno_steering.py, test_kyverno_quota.py and test_kyverno_cpu_guard.py prove in detail; here every object of
those tables goes through both and must come out the same. The CEL files go to the CLI whole, matchConditions
included: unlike a ClusterPolicy's (kyverno/kyverno#15833), a CEL policy's conditions are evaluated by its engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.gpu_platform.cpu_guard_policy import POLICY_NAME as CPU_GUARD_POLICY_NAME
from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from offline.runner import PROJECT, read_stack_file
from tests.e2e.kube import PULUMI_FIELD_MANAGER, Kubectl, load_documents
from tests.e2e.kyverno_cases import (
    NO_GPU,
    SEVERAL_GPUS,
    Obj,
    Runs,
    cpu_guard_pods,
    is_excluded,
    quota_namespaces,
    steering_pods,
)
from tests.e2e.kyverno_cli import FAIL, Applied, Kyverno, rules_only
from tests.e2e.stacks import Previewed, run_preview


def manifest(stack: Previewed, kind: str, name: str) -> Path:
    path = stack.out / "manifests" / f"{kind.lower()}-{name}.yaml"
    assert path.is_file(), f"{stack.name}: the preview wrote no {kind} {name}"
    return path


def mutated_or_same(applied: Applied, original: Obj) -> Obj:
    """What the pod became; the CLI writes no file for a pod no policy matched (its matchConditions were false)."""
    name = original["metadata"]["name"]
    return applied.mutated(name) if (applied.out / f"{name}-mutated.yaml").is_file() else original


@pytest.fixture(scope="module")
def steered(prod_stack: Previewed, kyverno: Kyverno, tmp_path_factory: pytest.TempPathFactory) -> Applied:
    policy = manifest(prod_stack, "MutatingPolicy", prod_stack.config.kyverno.policy_name)
    pods = list(steering_pods(prod_stack).values())
    return kyverno.apply(tmp_path_factory.mktemp("cel-steered") / "apply", [policy], pods)


def test_prod_writes_the_cel_types_and_its_twin_the_clusterpolicies(
    prod_stack: Previewed, clusterpolicy_stack: Previewed
) -> None:
    name = prod_stack.config.kyverno.policy_name
    assert json.loads(json.dumps(load_documents(manifest(prod_stack, "MutatingPolicy", name).read_text())))
    assert manifest(clusterpolicy_stack, "ClusterPolicy", name).is_file()


def test_every_pod_is_steered_by_the_mutating_policy_exactly_as_by_the_clusterpolicy(
    prod_stack: Previewed, clusterpolicy_stack: Previewed, runs: Runs, steered: Applied
) -> None:
    twin = runs.steered(clusterpolicy_stack)
    pods = steering_pods(prod_stack)
    assert set(pods) == set(steering_pods(clusterpolicy_stack))
    differ = {
        name: (mutated_or_same(steered, pod)["spec"], mutated_or_same(twin, pod)["spec"])
        for name, pod in pods.items()
        if mutated_or_same(steered, pod)["spec"] != mutated_or_same(twin, pod)["spec"]
    }
    assert differ == {}, f"MutatingPolicy vs ClusterPolicy:\n{json.dumps(differ, indent=1)}"
    # And the table is not trivially equal: GPU pods outside the excluded namespaces did change.
    changed = {name for name, pod in pods.items() if mutated_or_same(steered, pod) != pod}
    expected = {name for name, pod in pods.items() if name not in NO_GPU and not is_excluded(prod_stack, pod)}
    assert changed == expected


def test_a_second_pass_of_the_mutating_policy_changes_nothing(
    prod_stack: Previewed, kyverno: Kyverno, steered: Applied, tmp_path: Path
) -> None:
    policy = manifest(prod_stack, "MutatingPolicy", prod_stack.config.kyverno.policy_name)
    once = [mutated_or_same(steered, pod) for pod in steering_pods(prod_stack).values()]
    twice = kyverno.apply(tmp_path / "apply", [policy], once)
    assert [mutated_or_same(twice, pod)["spec"] for pod in once] == [pod["spec"] for pod in once]


def generated_quotas(applied: Applied, policies: list[str]) -> set[tuple[str, str, str]]:
    return {
        (q["metadata"]["namespace"], q["metadata"]["name"], json.dumps(q["spec"], sort_keys=True))
        for policy in policies
        for q in applied.generated(policy)
    }


def test_every_namespace_gets_the_quotas_from_the_generating_policies_that_the_clusterpolicy_gives_it(
    prod_stack: Previewed, clusterpolicy_stack: Previewed, runs: Runs, kyverno: Kyverno, tmp_path: Path
) -> None:
    names = [
        p.stem.removeprefix("generatingpolicy-")
        for p in sorted((prod_stack.out / "manifests").glob("generatingpolicy-*.yaml"))
    ]
    assert names, "prod writes no GeneratingPolicy"
    policies = [manifest(prod_stack, "GeneratingPolicy", name) for name in names]
    cel = kyverno.apply(tmp_path / "apply", policies, quota_namespaces(prod_stack))
    twin = runs.quotas(clusterpolicy_stack)
    ours = generated_quotas(cel, names)
    assert ours and ours == generated_quotas(twin, ["gpu-quota-for-labelled-namespaces"])


def test_the_validating_policy_refuses_exactly_the_multi_gpu_pods_the_clusterpolicy_refuses_with_its_message(
    prod_stack: Previewed, clusterpolicy_stack: Previewed, runs: Runs, kyverno: Kyverno, tmp_path: Path
) -> None:
    pods = steering_pods(prod_stack)
    cel = kyverno.apply(
        tmp_path / "apply", [manifest(prod_stack, "ValidatingPolicy", MULTI_GPU_POLICY_NAME)], [*pods.values()]
    )
    twin = runs.refused(clusterpolicy_stack)
    refused = failing(cel, pods)
    assert refused == failing(twin, pods) == set(SEVERAL_GPUS)
    for name in refused:
        namespace = pods[name]["metadata"]["namespace"]
        (ours,) = (
            m for r, m in cel.messages("Pod", name, namespace).items() if cel.rules("Pod", name, namespace)[r] == FAIL
        )
        (theirs,) = (
            m for r, m in twin.messages("Pod", name, namespace).items() if twin.rules("Pod", name, namespace)[r] == FAIL
        )
        # The same words from both: the count and the whole domains (each engine may frame them its own way).
        core = ours[ours.index("asks for ") :].rstrip(".")
        assert core and core in theirs, (ours, theirs)


def cpu_guard_stack(api: str, work: Path) -> Previewed:
    raw = read_stack_file("prod")
    raw[f"{PROJECT}:kyverno"] = {**raw.get(f"{PROJECT}:kyverno", {}), "minCpuPerGpu": "1", "policyApi": api}
    return run_preview(f"e2e-cpu-guard-{api}", raw, work)


def failing(applied: Applied, pods: dict[str, Obj]) -> set[str]:
    return {
        name for name, pod in pods.items() if FAIL in applied.rules("Pod", name, pod["metadata"]["namespace"]).values()
    }


def test_the_validating_policy_audits_exactly_the_pods_the_clusterpolicy_audits(
    kyverno: Kyverno, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pods = cpu_guard_pods()
    results: dict[str, set[str]] = {}
    for api, kind in (("cel", "ValidatingPolicy"), ("clusterpolicy", "ClusterPolicy")):
        stack = cpu_guard_stack(api, tmp_path_factory.mktemp(f"guard-{api}"))
        path = manifest(stack, kind, CPU_GUARD_POLICY_NAME)
        if kind == "ClusterPolicy":
            path = rules_only(path, tmp_path_factory.mktemp(f"guard-{api}-policy"))
        results[api] = failing(
            kyverno.apply(tmp_path_factory.mktemp(f"guard-{api}-run") / "apply", [path], list(pods.values())), pods
        )
    # 1 CPU per GPU: the article's notebook, and both 2-GPU pods at 1500m in all.
    assert (
        results["cel"]
        == results["clusterpolicy"]
        == {
            "notebook-1-gpu-600m",
            "trainer-2-gpus-1500m",
            "split-2-gpus-1500m",
        }
    )


def test_the_api_server_accepts_every_cel_policy_as_the_program_applies_it(
    prod_stack: Previewed, kubectl: Kubectl, crds: list[str], tmp_path: Path
) -> None:
    guard = cpu_guard_stack("cel", tmp_path)
    paths = [
        *sorted((prod_stack.out / "manifests").glob("mutatingpolicy-*.yaml")),
        *sorted((prod_stack.out / "manifests").glob("generatingpolicy-*.yaml")),
        *sorted((guard.out / "manifests").glob("validatingpolicy-*.yaml")),  # its refusal and its CPU guard
    ]
    assert len(paths) == 4  # steering, quota, multi-GPU refusal, CPU guard
    for path in paths:
        done = kubectl.run(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            PULUMI_FIELD_MANAGER,
            "-f",
            str(path),
            "--dry-run=server",
        )
        assert done.returncode == 0, f"{path.name}: {done.stderr}"
