"""The project's Kyverno policies, exactly as the previews write them, run by the real Kyverno engine; here the
steering policy (the quota policy and the CPU guard: test_kyverno_quota.py, test_kyverno_cpu_guard.py).

Two real engines share the work a cluster splits the same way:
- the API server evaluates each policy's `webhookConfiguration.matchConditions` and sends Kyverno only what passes
  (tests/e2e/match_conditions.py: the conditions verbatim, in a fail-closed webhook of their own);
- Kyverno runs the rules: `kyverno apply` (the CLI built from e2e/kyverno, the release whose CRD the tier installs)
  reports what each rule did to each object and writes what the objects became. The CLI cannot load a policy with
  matchConditions (kyverno/kyverno#15833, first test below), so it gets each file without them, which also proves
  the rules alone leave alone what the conditions keep out.
The stacks: prod as committed, the options stack (another label, a NoExecute taint, more excluded namespaces, three
quota selectors) and, for the CPU guard, prod with `gpu-pool:kyverno.minCpuPerGpu` "1" (and "1500m"). Every pod and
namespace is a valid Kubernetes 1.33 object. tests/gpu_platform/ proves the same behaviours on a Python model of
Kyverno; the `python_model` tests hold that model to the engines, object by object.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.gpu_platform.multi_gpu import POLICY_NAME as MULTI_GPU_POLICY_NAME
from components.gpu_platform.multi_gpu import RULE_NAME as MULTI_GPU_RULE
from components.gpu_platform.steering_policy import whole_cards_expression
from tests.day2.k8s_objects import validated
from tests.e2e.kube import Kubectl
from tests.e2e.kyverno_cases import (
    NEW_AFFINITY,
    NEW_TOLERATIONS,
    NO_GPU,
    SEVERAL_GPUS,
    SMOKE_EXEMPT,
    USER_NAMESPACE,
    Obj,
    Runs,
    asks_for_gpu,
    excluded_namespaces,
    gpu_expression,
    is_excluded,
    policy_path,
    required,
    steering_pods,
    steering_policy,
    steering_rules,
    the_policy,
    whole_cards,
    zone,
)
from tests.e2e.kyverno_cli import FAIL, PASS, SKIP, Applied, Kyverno, rules_only
from tests.e2e.match_conditions import Probe, ensure_pod_namespace, webhook_rule
from tests.e2e.stacks import Previewed
from tests.gpu_platform import kyverno_admission


def test_the_pinned_kyverno_cli_still_cannot_load_a_policy_with_match_conditions(
    clusterpolicy_stack: Previewed, kyverno: Kyverno, tmp_path: Path
) -> None:
    # kyverno/kyverno#15833. When this fails, the pinned CLI loads them: drop `rules_only` and let it evaluate them.
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(steering_pods(clusterpolicy_stack)["gpu-plain"]))
    done = kyverno.run(tmp_path, "apply", str(steering_policy(clusterpolicy_stack)), "--resource", str(pod_file))
    assert done.returncode != 0
    assert "nil pointer dereference" in done.stderr
    assert "pkg/validation/policy.Validate" in done.stderr


# --------------------------------------------------------------------------------------------------------
# The steering policy: what Kyverno does to the pods
# --------------------------------------------------------------------------------------------------------


def test_a_gpu_pod_without_tolerations_or_affinity_gets_exactly_the_gpu_toleration_and_node_rule(
    stack: Previewed, runs: Runs
) -> None:
    applied = runs.steered(stack)
    admitted = applied.mutated("gpu-plain")
    original = steering_pods(stack)["gpu-plain"]
    assert admitted["spec"]["tolerations"] == [stack.marking.toleration]
    assert admitted["spec"]["affinity"] == required({"matchExpressions": [gpu_expression(stack.marking)]})
    assert {k: v for k, v in admitted["spec"].items() if k not in ("tolerations", "affinity")} == original["spec"]
    assert admitted["metadata"] == original["metadata"]
    # Two rules did it; every other one saw its preconditions false.
    passed = {NEW_TOLERATIONS, NEW_AFFINITY}
    assert applied.rules("Pod", "gpu-plain", USER_NAMESPACE) == {
        r: PASS if r in passed else SKIP for r in steering_rules(stack)
    }


def test_a_gpu_asked_for_only_by_an_init_container_still_steers_the_pod(stack: Previewed, runs: Runs) -> None:
    admitted = runs.steered(stack).mutated("gpu-init-only")
    assert admitted["spec"]["tolerations"] == [stack.marking.toleration]
    assert admitted["spec"]["affinity"] == required({"matchExpressions": [gpu_expression(stack.marking)]})


def test_a_gpu_limit_given_as_a_number_counts_like_the_canonical_string(stack: Previewed, runs: Runs) -> None:
    assert runs.steered(stack).mutated("gpu-limit-number")["spec"]["tolerations"] == [stack.marking.toleration]


@pytest.mark.parametrize("name", NO_GPU)
def test_a_pod_asking_for_no_gpu_or_zero_gpus_is_left_untouched_by_every_rule(
    stack: Previewed, runs: Runs, name: str
) -> None:
    applied = runs.steered(stack)
    assert applied.mutated(name) == steering_pods(stack)[name]
    assert applied.rules("Pod", name, USER_NAMESPACE) == dict.fromkeys(steering_rules(stack), SKIP)


def test_gpu_pods_in_excluded_namespaces_are_left_untouched_and_match_no_rule(stack: Previewed, runs: Runs) -> None:
    applied = runs.steered(stack)
    pods = steering_pods(stack)
    for name, original in pods.items():
        if is_excluded(stack, original):
            assert applied.mutated(name) == original, name
            assert applied.rules("Pod", name, original["metadata"]["namespace"]) == {}, name
    assert sum(is_excluded(stack, p) for p in pods.values()) == len(excluded_namespaces(stack))


def test_unrelated_tolerations_are_kept_and_the_gpu_toleration_is_appended(stack: Previewed, runs: Runs) -> None:
    original = steering_pods(stack)["unrelated-tolerations"]["spec"]["tolerations"]
    admitted = runs.steered(stack).mutated("unrelated-tolerations")
    assert admitted["spec"]["tolerations"] == [*original, stack.marking.toleration]


@pytest.mark.parametrize("name", ["same-toleration", "same-toleration-no-operator"])
def test_an_equivalent_toleration_already_present_is_not_duplicated(stack: Previewed, runs: Runs, name: str) -> None:
    admitted = runs.steered(stack).mutated(name)
    assert admitted["spec"]["tolerations"] == steering_pods(stack)[name]["spec"]["tolerations"]
    assert admitted["spec"]["affinity"] == required({"matchExpressions": [gpu_expression(stack.marking)]})


def test_an_empty_toleration_list_gets_the_gpu_toleration(stack: Previewed, runs: Runs) -> None:
    assert runs.steered(stack).mutated("empty-tolerations")["spec"]["tolerations"] == [stack.marking.toleration]


def terms(pod: Obj) -> list[Obj]:
    found: list[Obj] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return found


def test_the_pods_own_required_terms_are_kept_and_each_gains_the_gpu_expression(stack: Previewed, runs: Runs) -> None:
    expression = gpu_expression(stack.marking)
    original = terms(steering_pods(stack)["required-terms"])
    admitted = runs.steered(stack).mutated("required-terms")
    assert terms(admitted) == [{"matchExpressions": [*t["matchExpressions"], expression]} for t in original]
    assert admitted["spec"]["tolerations"] == [stack.marking.toleration]


def test_a_term_that_already_requires_gpu_nodes_is_not_extended_again(stack: Previewed, runs: Runs) -> None:
    expression = gpu_expression(stack.marking)
    original = terms(steering_pods(stack)["term-already-steered"])
    assert terms(runs.steered(stack).mutated("term-already-steered")) == [
        original[0],
        {"matchExpressions": [*original[1]["matchExpressions"], expression]},
    ]


def test_a_term_with_only_match_fields_gains_match_expressions_and_keeps_its_fields(
    stack: Previewed, runs: Runs
) -> None:
    (original,) = terms(steering_pods(stack)["match-fields-term"])
    (term,) = terms(runs.steered(stack).mutated("match-fields-term"))
    assert term == {**original, "matchExpressions": [gpu_expression(stack.marking)]}


@pytest.mark.parametrize("name", ["empty-term", "empty-expressions-term"])
def test_an_empty_term_which_matches_no_node_is_not_widened_to_every_gpu_node(
    stack: Previewed, runs: Runs, name: str
) -> None:
    original = terms(steering_pods(stack)[name])
    admitted = terms(runs.steered(stack).mutated(name))
    assert admitted[0] == original[0]
    expression = gpu_expression(stack.marking)
    assert admitted[1:] == [{"matchExpressions": [*t["matchExpressions"], expression]} for t in original[1:]]


def test_preferred_node_affinity_and_pod_anti_affinity_are_kept_beside_the_added_node_rule(
    stack: Previewed, runs: Runs
) -> None:
    applied, pods = runs.steered(stack), steering_pods(stack)
    gpu_terms = {"nodeSelectorTerms": [{"matchExpressions": [gpu_expression(stack.marking)]}]}
    preferred = pods["preferred-only"]["spec"]["affinity"]["nodeAffinity"]
    assert applied.mutated("preferred-only")["spec"]["affinity"] == {
        "nodeAffinity": {**preferred, "requiredDuringSchedulingIgnoredDuringExecution": gpu_terms}
    }
    anti = pods["anti-affinity-only"]["spec"]["affinity"]
    assert applied.mutated("anti-affinity-only")["spec"]["affinity"] == {
        **anti,
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": gpu_terms},
    }


def test_every_pod_kyverno_mutates_is_still_a_valid_kubernetes_pod(stack: Previewed, runs: Runs) -> None:
    applied = runs.steered(stack)
    for name in steering_pods(stack):
        validated(applied.mutated(name))


def test_mutating_an_already_mutated_pod_changes_nothing(stack: Previewed, runs: Runs) -> None:
    first, second = runs.steered(stack), runs.steered_twice(stack)
    for name, original in steering_pods(stack).items():
        assert second.mutated(name) == first.mutated(name), name
        # No rule applies a patch: each sees its addition already there.
        assert PASS not in second.rules("Pod", name, original["metadata"]["namespace"]).values(), name


def test_a_pod_update_is_never_mutated_because_pod_affinity_is_immutable(
    stack: Previewed, kyverno: Kyverno, tmp_path: Path
) -> None:
    original = steering_pods(stack)["gpu-plain"]
    policy = rules_only(steering_policy(stack), tmp_path / "policy")
    applied = kyverno.apply(tmp_path / "update", [policy], [original], operation="UPDATE")
    assert applied.mutated("gpu-plain") == original
    assert applied.rules("Pod", "gpu-plain", USER_NAMESPACE) == {}


def test_the_python_model_of_the_rules_predicts_exactly_what_kyverno_does_to_every_pod(
    stack: Previewed, runs: Runs
) -> None:
    # tests/gpu_platform/ trusts kyverno_admission.py where it has no engine: hold it to the engine.
    policy = the_policy(steering_policy(stack))
    applied = runs.steered(stack)
    disagreements = []
    for name, original in steering_pods(stack).items():
        request = kyverno_admission.pod_request(original, namespace=original["metadata"]["namespace"])
        modelled, real = kyverno_admission.run_rules(policy, request), applied.mutated(name)
        if modelled != real:
            disagreements.append(f"{name}:\n  model:  {modelled['spec']}\n  engine: {real['spec']}")
    assert not disagreements, "the model and Kyverno disagree on:\n" + "\n".join(disagreements)


# --------------------------------------------------------------------------------------------------------
# Multi-GPU pods (issue 37 item 4): steered to whole domains, refused when none has that many cards
# --------------------------------------------------------------------------------------------------------


def test_a_pod_holding_several_gpus_also_requires_a_whole_domain_in_each_of_its_terms(
    stack: Previewed, runs: Runs
) -> None:
    whole = whole_cards(stack)
    assert whole.profiles, f"{stack.name} has no whole domain: nothing to steer to"
    gpu, several = gpu_expression(stack.marking), whole_cards_expression(whole)
    applied, pods = runs.steered(stack), steering_pods(stack)
    for name in SEVERAL_GPUS:
        affinity = applied.mutated(name)["spec"]["affinity"]
        if name == "gpu-several-own-terms":
            fields = pods[name]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert affinity == required(
                {"matchExpressions": [zone("dc1"), gpu, several]},
                {**fields["nodeSelectorTerms"][1], "matchExpressions": [gpu, several]},
                {},
            )
        else:
            assert affinity == required({"matchExpressions": [gpu, several]}), name
        assert applied.rules("Pod", name, pods[name]["metadata"]["namespace"])[steering_rules(stack)[-1]] == PASS
    # One GPU at a time (a plain init container runs before the app), and the smoke Job's pod: no whole-card rule.
    for name in ("gpu-plain", "gpu-init-then-app", SMOKE_EXEMPT):
        assert applied.mutated(name)["spec"]["affinity"] == required({"matchExpressions": [gpu]}), name


def refused(applied: Applied, pods: dict[str, Obj]) -> dict[str, str]:
    """Pod name -> Kyverno's message, for each pod a rule failed."""
    found = {}
    for name, pod in pods.items():
        namespace = pod["metadata"]["namespace"]
        results, messages = applied.rules("Pod", name, namespace), applied.messages("Pod", name, namespace)
        failed = [messages[rule] for rule, result in results.items() if result == FAIL]
        if failed:
            found[name] = " / ".join(failed)
    return found


def test_kyverno_refuses_exactly_the_pods_asking_for_more_gpus_than_a_whole_domain_has_naming_count_and_domains(
    stack: Previewed, runs: Runs
) -> None:
    whole, resource = whole_cards(stack), stack.config.kyverno.gpu_resource
    pods = steering_pods(stack)
    got = refused(runs.refused(stack), pods)
    # Every stack here has one whole domain of one card: every pod holding several GPUs but the smoke Job's.
    assert whole.limit == 1
    assert set(got) == set(SEVERAL_GPUS)
    names = ", ".join(f"{name} ({cards} card{'s' if cards > 1 else ''})" for name, cards in whole.domains)
    assert (
        f"asks for 2 {resource}" in got["gpu-two-containers"]
        and f"the whole domains are {names}" in got["gpu-two-containers"]
    )
    # The model agrees, pod by pod, message included.
    policy = the_policy(policy_path(stack, MULTI_GPU_POLICY_NAME))
    modelled = {
        name: kyverno_admission.denials(policy, kyverno_admission.pod_request(p, namespace=p["metadata"]["namespace"]))
        for name, p in pods.items()
    }
    assert {name for name, messages in modelled.items() if messages} == set(got)
    assert all(modelled[name][0] in got[name] for name in got), {n: (modelled[n], got[n]) for n in got}
    assert [r["name"] for r in policy["spec"]["rules"]] == [MULTI_GPU_RULE]


# --------------------------------------------------------------------------------------------------------
# The steering policy: which pods the API server sends to Kyverno
# --------------------------------------------------------------------------------------------------------


@pytest.fixture
def pod_probe(stack: Previewed, kubectl: Kubectl) -> Probe:
    for name in sorted({p["metadata"]["namespace"] for p in steering_pods(stack).values()}):
        ensure_pod_namespace(kubectl, name)
    return Probe(kubectl)


def test_the_api_server_sends_kyverno_exactly_the_gpu_pods_outside_the_excluded_namespaces(
    stack: Previewed, pod_probe: Probe
) -> None:
    pods = steering_pods(stack)
    policy = the_policy(steering_policy(stack))
    with pod_probe.webhook(policy, [webhook_rule("pods", "CREATE")], control=pods["gpu-plain"]):
        sent = {name: pod_probe.create_reaches_kyverno(p) for name, p in pods.items()}
    assert sent == {name: asks_for_gpu(name) and not is_excluded(stack, p) for name, p in pods.items()}
    # The model (celpy) agrees with the server's CEL.
    requests = {
        name: kyverno_admission.pod_request(p, namespace=p["metadata"]["namespace"]) for name, p in pods.items()
    }
    assert {name: kyverno_admission.webhook_called(policy, r) for name, r in requests.items()} == sent


def test_deleting_a_gpu_pod_never_reaches_the_fail_closed_webhook(
    stack: Previewed, pod_probe: Probe, kubectl: Kubectl
) -> None:
    # Created before the probe's webhook exists; on DELETE `object` is null, so the conditions must say no first.
    name = f"gpu-to-delete-{pod_probe.token}"
    existing = pod_probe.label(steering_pods(stack)["gpu-plain"])
    existing["metadata"]["name"] = name
    kubectl.create(existing, field_manager="e2e-setup")
    try:
        policy = the_policy(steering_policy(stack))
        rules = [webhook_rule("pods", "CREATE", "DELETE")]
        with pod_probe.webhook(policy, rules, control=steering_pods(stack)["gpu-plain"]):
            assert not pod_probe.reaches_kyverno("delete", "pod", name, "-n", USER_NAMESPACE)
    finally:
        kubectl("delete", "pod", name, "-n", USER_NAMESPACE, "--wait=false")
