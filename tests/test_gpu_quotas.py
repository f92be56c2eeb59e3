"""GPU quotas: the article's surprise was a namespace quota that capped CPU and memory but not GPUs."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType
from pydantic import Field, ValidationError

from components.gpu_quotas import build_gpu_quotas, build_resource_quota
from components.kyverno_policies import QUOTA_POLICY_NAME, build_gpu_quota_generate_policy
from config.base import ConfigModel
from config.errors import format_validation_error
from config.gpu_quotas import GpuQuotasConfig, quota_warnings
from tests.test_kyverno_steering_semantics import resolve, rule_matches


class _Stack(ConfigModel):
    """The key as it sits in the stack config, so error messages carry the full `gpu-pool:gpuQuotas...` path."""

    gpu_quotas: GpuQuotasConfig = Field(default_factory=GpuQuotasConfig)


def _errors(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        _Stack.model_validate({"gpuQuotas": raw})
    return format_validation_error(caught.value)


KUBEFLOW_LABELS = {"app.kubernetes.io/part-of": "kubeflow-profile"}
TEAM_LABELS = {"example.org/team": "research", "example.org/tier": "gpu"}
KUBEFLOW: dict[str, Any] = {"name": "kubeflow-profiles", "matchLabels": KUBEFLOW_LABELS, "maxGpus": 1}
TEAM: dict[str, Any] = {"name": "research", "matchLabels": TEAM_LABELS, "maxGpus": 2}


def _quotas(**raw: Any) -> GpuQuotasConfig:
    return GpuQuotasConfig.model_validate(raw)


# --- Pulumi-owned quotas -----------------------------------------------------------------------------------


def test_a_namespace_quota_caps_gpu_requests_with_the_requests_prefix() -> None:
    quota = build_resource_quota("kubeflow-user", 2, name="gpu-quota")
    assert quota["apiVersion"] == "v1" and quota["kind"] == "ResourceQuota"
    assert quota["metadata"]["name"] == "gpu-quota"
    assert quota["metadata"]["namespace"] == "kubeflow-user"
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "2"}}


def test_a_quota_never_names_gpu_limits_which_kubernetes_refuses_for_extended_resources() -> None:
    assert not any(key.startswith("limits.") for key in build_resource_quota("a", 1, name="q")["spec"]["hard"])


def test_a_zero_quota_forbids_gpus_in_the_namespace() -> None:
    assert build_resource_quota("batch", 0, name="gpu-quota")["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_a_negative_quota_is_refused_by_the_builder_too() -> None:
    with pytest.raises(ValueError, match="batch"):
        build_resource_quota("batch", -1, name="gpu-quota")


def test_explicit_namespaces_become_quotas_sorted_by_namespace_with_the_configured_name() -> None:
    quotas = _quotas(namespaces={"zeta": 1, "alpha": 3, "mid": 0}, quotaName="gpu-cap")
    built = build_gpu_quotas(quotas)
    assert [q["metadata"]["namespace"] for q in built] == ["alpha", "mid", "zeta"]
    assert [q["spec"]["hard"]["requests.nvidia.com/gpu"] for q in built] == ["3", "0", "1"]
    assert {q["metadata"]["name"] for q in built} == {"gpu-cap"}
    assert build_gpu_quotas(quotas) == built


def test_no_quotas_are_built_by_default() -> None:
    assert build_gpu_quotas(GpuQuotasConfig()) == []
    assert build_gpu_quota_generate_policy(GpuQuotasConfig()) is None


# --- Validation ----------------------------------------------------------------------------------------------


def test_a_negative_namespace_quota_is_refused_with_a_message_naming_the_namespace_key() -> None:
    messages = _errors({"namespaces": {"team-a": -1}})
    assert len(messages) == 1
    assert messages[0].startswith("gpu-pool:gpuQuotas.namespaces.team-a: ")
    assert "0 or more" in messages[0] and "(got -1)" in messages[0]


def test_a_namespace_that_is_not_a_dns_label_is_refused() -> None:
    messages = _errors({"namespaces": {"Team_A": 1}})
    assert len(messages) == 1
    assert messages[0].startswith("gpu-pool:gpuQuotas.namespaces: namespace 'Team_A' must be a DNS label")


def test_a_quota_given_as_text_or_a_boolean_is_refused_not_coerced() -> None:
    assert _errors({"namespaces": {"a": "2"}})[0].startswith("gpu-pool:gpuQuotas.namespaces.a:")
    assert _errors({"namespaces": {"a": True}})[0].startswith("gpu-pool:gpuQuotas.namespaces.a:")


def test_a_selector_rule_with_no_labels_is_refused_because_it_would_match_every_namespace() -> None:
    messages = _errors({"selectors": [{"name": "all", "matchLabels": {}, "maxGpus": 1}]})
    assert messages[0].startswith("gpu-pool:gpuQuotas.selectors[0].matchLabels: must name at least one label")


def test_a_selector_rule_with_an_invalid_label_key_or_value_is_refused_naming_the_label() -> None:
    bad_key = _errors({"selectors": [{"name": "x", "matchLabels": {"bad key": "v"}, "maxGpus": 1}]})
    assert bad_key[0].startswith("gpu-pool:gpuQuotas.selectors[0].matchLabels:") and "'bad key'" in bad_key[0]
    bad_value = _errors({"selectors": [{"name": "x", "matchLabels": {"team": "a b"}, "maxGpus": 1}]})
    assert "'a b'" in bad_value[0]


def test_a_negative_selector_cap_is_refused_naming_its_key() -> None:
    messages = _errors({"selectors": [{**KUBEFLOW, "maxGpus": -2}]})
    assert messages[0].startswith("gpu-pool:gpuQuotas.selectors[0].maxGpus:")


def test_two_selector_rules_with_one_name_are_refused() -> None:
    messages = _errors({"selectors": [KUBEFLOW, {**TEAM, "name": KUBEFLOW["name"]}]})
    assert messages[0].startswith("gpu-pool:gpuQuotas.selectors:") and "kubeflow-profiles" in messages[0]


def test_a_misspelt_key_is_refused_with_a_suggestion() -> None:
    messages = _errors({"namespace": {"a": 1}})
    assert "did you mean 'namespaces'" in messages[0]


# --- Warnings ------------------------------------------------------------------------------------------------


def test_a_quota_larger_than_the_pool_warns_and_names_its_key() -> None:
    quotas = _quotas(namespaces={"big": 9, "fits": 9 - 0}, selectors=[{**KUBEFLOW, "maxGpus": 10}])
    warnings = quota_warnings(quotas, schedulable_slots=9)
    assert len(warnings) == 1
    assert warnings[0].startswith("gpu-pool:gpuQuotas.selectors[0].maxGpus:")
    warnings = quota_warnings(quotas, schedulable_slots=8)
    assert [w.split(":")[1] for w in warnings] == [
        "gpuQuotas.namespaces.big",
        "gpuQuotas.namespaces.fits",
        "gpuQuotas.selectors[0].maxGpus",
    ]


def test_quotas_within_the_pool_do_not_warn() -> None:
    # The article's plan: dc1 and dc2 time-sliced x4, dc3 whole = 9 schedulable GPUs.
    assert quota_warnings(_quotas(namespaces={"a": 9, "b": 0}, selectors=[TEAM]), schedulable_slots=9) == []


# --- Kyverno generate policy ---------------------------------------------------------------------------------


def _namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _request(obj: dict[str, Any] | None, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "namespace": "",
        "object": obj,
    }


def _sent_to_kyverno(policy: dict[str, Any], request: dict[str, Any]) -> bool:
    env = celpy.Environment()
    activation = {
        "object": json_to_cel(request["object"]),
        "request": json_to_cel({k: v for k, v in request.items() if k != "object"}),
    }
    results = [
        env.program(env.compile(c["expression"])).evaluate(activation)
        for c in policy["spec"]["webhookConfiguration"]["matchConditions"]
    ]
    assert all(isinstance(r, BoolType) for r in results)
    return all(results)


def _generated(policy: dict[str, Any], namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """What Kyverno's background controller creates for one trigger namespace."""
    request = _request(namespace)
    context = {"request": request}
    made = []
    for rule in policy["spec"]["rules"]:
        if not rule_matches(rule, request):
            continue
        generate = rule["generate"]
        data = generate["data"]
        made.append(
            {
                "apiVersion": generate["apiVersion"],
                "kind": generate["kind"],
                "metadata": {
                    **data["metadata"],
                    "name": resolve(generate["name"], context),
                    "namespace": resolve(generate["namespace"], context),
                },
                "spec": data["spec"],
            }
        )
    return made


@pytest.fixture(scope="module")
def quota_policy() -> dict[str, Any]:
    policy = build_gpu_quota_generate_policy(_quotas(selectors=[KUBEFLOW, TEAM]))
    assert policy is not None
    return policy


def test_the_generate_policy_has_one_rule_per_selector_each_matching_namespaces_by_labels(
    quota_policy: dict[str, Any],
) -> None:
    assert quota_policy["metadata"]["name"] == QUOTA_POLICY_NAME
    assert [r["name"] for r in quota_policy["spec"]["rules"]] == ["kubeflow-profiles", "research"]
    assert quota_policy["spec"]["rules"][1]["match"] == {
        "any": [{"resources": {"kinds": ["Namespace"], "selector": {"matchLabels": TEAM_LABELS}}}]
    }


def test_each_rule_generates_a_synchronised_gpu_quota_in_existing_namespaces_too(quota_policy: dict[str, Any]) -> None:
    assert quota_policy["spec"]["background"] is True
    for rule in quota_policy["spec"]["rules"]:
        generate = rule["generate"]
        assert generate["synchronize"] is True
        assert generate["generateExisting"] is True
        assert (generate["apiVersion"], generate["kind"]) == ("v1", "ResourceQuota")
        assert generate["namespace"] == "{{request.object.metadata.name}}"
    # The rule-level field, not the deprecated spec-level one.
    assert "generateExisting" not in quota_policy["spec"]


def test_a_labelled_namespace_gets_its_rules_quota_in_itself(quota_policy: dict[str, Any]) -> None:
    made = _generated(quota_policy, _namespace("alice", KUBEFLOW_LABELS))
    assert made == [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {
                "labels": {"app.kubernetes.io/part-of": "gpu-pool"},
                "name": "gpu-quota-kubeflow-profiles",
                "namespace": "alice",
            },
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
        }
    ]


def test_a_namespace_matching_two_rules_gets_two_quotas_so_the_smaller_cap_wins(quota_policy: dict[str, Any]) -> None:
    labels = {**KUBEFLOW_LABELS, **TEAM_LABELS}
    made = _generated(quota_policy, _namespace("bob", labels))
    assert sorted(q["metadata"]["name"] for q in made) == ["gpu-quota-kubeflow-profiles", "gpu-quota-research"]
    assert min(int(q["spec"]["hard"]["requests.nvidia.com/gpu"]) for q in made) == 1


def test_a_namespace_with_only_some_of_a_rules_labels_gets_no_quota(quota_policy: dict[str, Any]) -> None:
    assert _generated(quota_policy, _namespace("carol", {"example.org/team": "research"})) == []


def test_only_labelled_namespaces_are_sent_to_kyverno_so_an_outage_blocks_nothing_else(
    quota_policy: dict[str, Any],
) -> None:
    assert _sent_to_kyverno(quota_policy, _request(_namespace("alice", KUBEFLOW_LABELS)))
    assert _sent_to_kyverno(quota_policy, _request(_namespace("bob", TEAM_LABELS), "UPDATE"))
    assert not _sent_to_kyverno(quota_policy, _request(_namespace("carol", {"example.org/team": "research"})))
    assert not _sent_to_kyverno(
        quota_policy, _request({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d"}})
    )
    assert not _sent_to_kyverno(quota_policy, _request(None, "DELETE"))


def test_the_generate_policy_fails_closed_by_default_and_declares_its_minimum_kyverno(
    quota_policy: dict[str, Any],
) -> None:
    assert quota_policy["spec"]["webhookConfiguration"]["failurePolicy"] == "Fail"
    assert quota_policy["metadata"]["annotations"]["policies.kyverno.io/minversion"] == "1.13.0"
    relaxed = build_gpu_quota_generate_policy(_quotas(selectors=[KUBEFLOW], failurePolicy="Ignore"))
    assert relaxed is not None and relaxed["spec"]["webhookConfiguration"]["failurePolicy"] == "Ignore"
