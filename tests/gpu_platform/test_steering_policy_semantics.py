"""What the GPU steering policy does to real pods, run through the strict Kyverno model in kyverno_admission.py
(the e2e tier holds that model to the real Kyverno CLI)."""

from __future__ import annotations

from typing import Any

import jmespath
import pytest
import yaml

from components.gpu_platform.multi_gpu import WholeCards
from components.gpu_platform.steering_policy import AUTOGEN_ANNOTATION, build_gpu_steering_policy
from config.kyverno import KyvernoConfig
from knowledge.kyverno import MINIMUM_KYVERNO_VERSION
from tests.gpu_platform.kyverno_admission import (
    UnresolvedVariable,
    UnsupportedConstruct,
    admit,
    apply_rule,
    container,
    pod,
    pod_request,
    preconditions_pass,
    resolve,
    run_rules,
    webhook_called,
)

OPERATOR_NAMESPACE = "gpu-operator"
# Every domain time-sliced: no multi-GPU steering (test_multi_gpu_policy.py covers it), so these pods are the base.
NO_WHOLE_DOMAIN = WholeCards(profiles=(), domains=(), smoke_namespace="gpu-smoke-test")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
GPU_EXPRESSION = {"key": "nodepool", "operator": "In", "values": ["gpu"]}
GPU_NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [GPU_EXPRESSION]}]}
}


GPU = "1"  # the API server sends quantities in canonical string form

PODS: dict[str, dict[str, Any]] = {
    "gpu in a container": pod(container(gpu=GPU)),
    "gpu only in an initContainer": pod(container(), init=[container("warmup", gpu=GPU)]),
    "gpu limit as a JSON number": pod(container(gpu=2)),
    "gpu limit zero": pod(container(gpu="0")),
    "no gpu": pod(container(resources={"limits": {"cpu": "1"}})),
    "unrelated tolerations": pod(
        container(gpu=GPU),
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    ),
    "identical toleration": pod(container(gpu=GPU), tolerations=[dict(GPU_TOLERATION)]),
    "identical toleration without operator": pod(
        container(gpu=GPU), tolerations=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    ),
    "empty tolerations": pod(container(gpu=GPU), tolerations=[]),
    "required terms": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc1"]}
                            ]
                        },
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc2"]}
                            ]
                        },
                    ]
                }
            }
        },
    ),
    "term already steered": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [dict(GPU_EXPRESSION)]},
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w3"]}]},
                    ]
                }
            }
        },
    ),
    "term with only matchFields": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["rke2-worker-dc1-gpu-a"]}
                            ]
                        }
                    ]
                }
            }
        },
    ),
    "empty term": pod(
        container(gpu=GPU),
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}},
    ),
    "term with an empty expression list": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": []},
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w1"]}]},
                    ]
                }
            }
        },
    ),
    "preferred affinity only": pod(
        container(gpu=GPU),
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["dc3"]}
                            ]
                        },
                    }
                ]
            }
        },
    ),
    "pod anti-affinity only": pod(
        container(gpu=GPU),
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    ),
}


NO_GPU = {"gpu limit zero", "no gpu"}


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    return build_gpu_steering_policy(KyvernoConfig(), operator_namespace=OPERATOR_NAMESPACE, whole=NO_WHOLE_DOMAIN)


def _required_terms(admitted: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = admitted["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return terms


# --------------------------------------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------------------------------------


def test_a_gpu_pod_gets_exactly_the_toleration_and_node_rule_the_article_shows(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu in a container"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}
    assert admitted["spec"]["containers"] == PODS["gpu in a container"]["spec"]["containers"]


def test_a_gpu_asked_for_only_by_an_init_container_still_steers_the_pod(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu only in an initContainer"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}


def test_a_gpu_limit_given_as_a_number_counts_like_the_canonical_string(policy: dict[str, Any]) -> None:
    admitted = admit(policy, PODS["gpu limit as a JSON number"])
    assert admitted["spec"]["tolerations"] == [GPU_TOLERATION]


@pytest.mark.parametrize("name", sorted(NO_GPU))
def test_a_pod_without_a_non_zero_gpu_limit_never_reaches_kyverno_and_is_unchanged(
    policy: dict[str, Any], name: str
) -> None:
    assert not webhook_called(policy, pod_request(PODS[name]))
    assert admit(policy, PODS[name]) == PODS[name]


@pytest.mark.parametrize("name", sorted(NO_GPU))
def test_the_rules_alone_leave_a_non_gpu_pod_unchanged_where_match_conditions_do_not_apply(
    policy: dict[str, Any], name: str
) -> None:
    # Defence in depth: should Kyverno ever be called for the pod anyway (a background scan, a webhook registered
    # without the conditions), the rules' preconditions agree with the conditions and leave it alone.
    assert run_rules(policy, pod_request(PODS[name])) == PODS[name]


def test_match_conditions_and_rule_preconditions_agree_on_which_pods_ask_for_a_gpu(policy: dict[str, Any]) -> None:
    for name, body in PODS.items():
        asks_for_gpu = name not in NO_GPU
        assert webhook_called(policy, pod_request(body)) == asks_for_gpu, name
        # Every GPU pod in the table lacks the toleration or the node rule, so the rules must change it.
        assert (run_rules(policy, pod_request(body)) != body) == asks_for_gpu, name


def test_unrelated_tolerations_are_kept_and_the_gpu_toleration_is_appended(policy: dict[str, Any]) -> None:
    original = PODS["unrelated tolerations"]["spec"]["tolerations"]
    admitted = admit(policy, PODS["unrelated tolerations"])
    assert admitted["spec"]["tolerations"] == [*original, GPU_TOLERATION]


@pytest.mark.parametrize("name", ["identical toleration", "identical toleration without operator"])
def test_an_equivalent_toleration_already_present_is_not_duplicated(policy: dict[str, Any], name: str) -> None:
    admitted = admit(policy, PODS[name])
    assert admitted["spec"]["tolerations"] == PODS[name]["spec"]["tolerations"]
    assert admitted["spec"]["affinity"] == {"nodeAffinity": GPU_NODE_AFFINITY}


def test_an_empty_toleration_list_gets_the_gpu_toleration(policy: dict[str, Any]) -> None:
    assert admit(policy, PODS["empty tolerations"])["spec"]["tolerations"] == [GPU_TOLERATION]


def test_every_existing_required_term_is_extended_once_so_the_ored_terms_all_mean_gpu_nodes(
    policy: dict[str, Any],
) -> None:
    original = _required_terms(PODS["required terms"])
    terms = _required_terms(admit(policy, PODS["required terms"]))
    assert len(terms) == len(original)
    for before, after in zip(original, terms, strict=True):
        assert after["matchExpressions"] == [*before["matchExpressions"], GPU_EXPRESSION]


def test_a_term_that_already_requires_gpu_nodes_is_not_extended_again(policy: dict[str, Any]) -> None:
    terms = _required_terms(admit(policy, PODS["term already steered"]))
    assert terms[0]["matchExpressions"] == [GPU_EXPRESSION]
    assert terms[1]["matchExpressions"][-1] == GPU_EXPRESSION
    assert [e == GPU_EXPRESSION for term in terms for e in term["matchExpressions"]].count(True) == 2


def test_a_term_with_only_match_fields_gains_match_expressions_and_keeps_its_fields(policy: dict[str, Any]) -> None:
    original = _required_terms(PODS["term with only matchFields"])[0]
    term = _required_terms(admit(policy, PODS["term with only matchFields"]))[0]
    assert term == {"matchFields": original["matchFields"], "matchExpressions": [GPU_EXPRESSION]}


@pytest.mark.parametrize("name", ["empty term", "term with an empty expression list"])
def test_an_empty_term_which_matches_no_node_is_not_widened_to_every_gpu_node(
    policy: dict[str, Any], name: str
) -> None:
    original = _required_terms(PODS[name])
    terms = _required_terms(admit(policy, PODS[name]))
    assert terms[0] == original[0]
    for before, after in zip(original[1:], terms[1:], strict=True):
        assert after["matchExpressions"] == [*before["matchExpressions"], GPU_EXPRESSION]


def test_preferred_node_affinity_is_untouched_and_the_required_rule_is_added_beside_it(
    policy: dict[str, Any],
) -> None:
    original = PODS["preferred affinity only"]["spec"]["affinity"]["nodeAffinity"]
    node_affinity = admit(policy, PODS["preferred affinity only"])["spec"]["affinity"]["nodeAffinity"]
    assert (
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
        == original["preferredDuringSchedulingIgnoredDuringExecution"]
    )
    assert (
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        == GPU_NODE_AFFINITY["requiredDuringSchedulingIgnoredDuringExecution"]
    )


def test_pod_anti_affinity_is_kept_when_node_affinity_is_added(policy: dict[str, Any]) -> None:
    affinity = admit(policy, PODS["pod anti-affinity only"])["spec"]["affinity"]
    assert affinity == {**PODS["pod anti-affinity only"]["spec"]["affinity"], "nodeAffinity": GPU_NODE_AFFINITY}


@pytest.mark.parametrize("name", sorted(PODS))
def test_a_second_pass_as_on_webhook_reinvocation_changes_nothing(policy: dict[str, Any], name: str) -> None:
    once = admit(policy, PODS[name])
    assert admit(policy, once) == once


@pytest.mark.parametrize("namespace", [OPERATOR_NAMESPACE, "kube-system"])
def test_gpu_pods_in_excluded_namespaces_are_neither_sent_to_kyverno_nor_mutated(
    policy: dict[str, Any], namespace: str
) -> None:
    # The operator's validator pods request a GPU: a Kyverno outage must not block the operator itself.
    request = pod_request(PODS["gpu in a container"], namespace=namespace)
    assert not webhook_called(policy, request)
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_the_operator_namespace_is_excluded_even_when_the_config_omits_it() -> None:
    cfg = KyvernoConfig.model_validate({"excludedNamespaces": ["kube-system"]})
    policy = build_gpu_steering_policy(cfg, operator_namespace="nvidia-gpu", whole=NO_WHOLE_DOMAIN)
    request = pod_request(PODS["gpu in a container"], namespace="nvidia-gpu")
    assert not webhook_called(policy, request)
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_an_update_is_never_mutated_because_pod_affinity_is_immutable(policy: dict[str, Any]) -> None:
    request = pod_request(PODS["gpu in a container"], operation="UPDATE")
    assert run_rules(policy, request) == PODS["gpu in a container"]


def test_the_configured_label_taint_and_resource_are_what_the_policy_adds() -> None:
    cfg = KyvernoConfig.model_validate(
        {
            "gpuNodeLabelKey": "example.org/accelerator",
            "gpuNodeLabelValue": "a1000",
            "taintKey": "example.org/gpu-only",
            "taintValue": "yes",
            "taintEffect": "NoExecute",
            "gpuResource": "example.org/gpu",
        }
    )
    policy = build_gpu_steering_policy(cfg, operator_namespace=OPERATOR_NAMESPACE, whole=NO_WHOLE_DOMAIN)
    body = pod(container(resources={"limits": {"example.org/gpu": "1"}}))
    admitted = admit(policy, body)
    assert admitted["spec"]["tolerations"] == [
        {"key": "example.org/gpu-only", "operator": "Equal", "value": "yes", "effect": "NoExecute"}
    ]
    assert _required_terms(admitted) == [
        {"matchExpressions": [{"key": "example.org/accelerator", "operator": "In", "values": ["a1000"]}]}
    ]
    assert admit(policy, PODS["gpu in a container"]) == PODS["gpu in a container"]


# --------------------------------------------------------------------------------------------------------
# Policy settings
# --------------------------------------------------------------------------------------------------------


def test_every_rule_matches_pod_create_only(policy: dict[str, Any]) -> None:
    for rule in policy["spec"]["rules"]:
        assert rule["match"] == {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]}, rule["name"]


def test_autogen_is_off_so_deployments_and_jobs_are_not_rewritten(policy: dict[str, Any]) -> None:
    assert policy["metadata"]["annotations"][AUTOGEN_ANNOTATION] == "none"


def test_the_policy_runs_at_admission_only_and_fails_closed_by_default(policy: dict[str, Any]) -> None:
    assert policy["spec"]["background"] is False
    assert policy["spec"]["admission"] is True
    assert policy["spec"]["webhookConfiguration"]["failurePolicy"] == "Fail"
    assert policy["spec"]["webhookConfiguration"]["timeoutSeconds"] == 10


def test_failure_policy_and_timeout_come_from_the_config() -> None:
    cfg = KyvernoConfig.model_validate({"failurePolicy": "Ignore", "webhookTimeoutSeconds": 5})
    hook = build_gpu_steering_policy(cfg, operator_namespace=OPERATOR_NAMESPACE, whole=NO_WHOLE_DOMAIN)["spec"][
        "webhookConfiguration"
    ]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 5)


def test_the_policy_uses_json_patches_and_never_strategic_merge(policy: dict[str, Any]) -> None:
    text = yaml.safe_dump(policy)
    assert "patchStrategicMerge" not in text
    assert "patchesJson6902" in text


def test_the_policy_declares_its_title_description_and_minimum_kyverno_version(policy: dict[str, Any]) -> None:
    annotations = policy["metadata"]["annotations"]
    assert annotations["policies.kyverno.io/minversion"] == MINIMUM_KYVERNO_VERSION == "1.13.0"
    assert annotations["policies.kyverno.io/title"]
    assert "nvidia.com/gpu" in annotations["policies.kyverno.io/description"]
    assert policy["metadata"]["name"] == "gpu-pods-to-gpu-nodes"


# --------------------------------------------------------------------------------------------------------
# The model itself refuses what it does not implement
# --------------------------------------------------------------------------------------------------------


def test_the_model_refuses_a_kyverno_only_jmespath_function() -> None:
    with pytest.raises(jmespath.exceptions.UnknownFunctionError):
        resolve("{{ base64_decode('eA==') }}", {})


def test_the_model_refuses_an_operator_it_does_not_implement() -> None:
    with pytest.raises(UnsupportedConstruct):
        preconditions_pass({"all": [{"key": "a", "operator": "AnyIn", "value": ["a"]}]}, {})


def test_the_model_refuses_a_variable_that_resolves_to_null() -> None:
    with pytest.raises(UnresolvedVariable):
        resolve("{{ request.object.spec.tolerations }}", {"request": {"object": {"spec": {}}}})


def test_the_model_refuses_a_rule_field_it_does_not_implement(policy: dict[str, Any]) -> None:
    rule = {**policy["spec"]["rules"][0], "context": [{"name": "x", "variable": {"value": 1}}]}
    with pytest.raises(UnsupportedConstruct):
        apply_rule(rule, pod_request(PODS["gpu in a container"]), PODS["gpu in a container"])


def test_deleting_a_gpu_pod_never_reaches_the_fail_closed_webhook() -> None:
    policy = build_gpu_steering_policy(KyvernoConfig(), operator_namespace="gpu-operator", whole=NO_WHOLE_DOMAIN)
    request = {"operation": "DELETE", "namespace": "team-a", "object": None}
    assert webhook_called(policy, request) is False
