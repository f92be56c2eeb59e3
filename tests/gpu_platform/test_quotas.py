"""GPU quotas: the article's surprise was a namespace quota that capped CPU and memory but not GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, ValidationError

from components.gpu_platform.quota_policy import build_gpu_quota_generate_policy
from components.gpu_platform.quotas import build_gpu_quotas, build_resource_quota
from config.base import ConfigModel
from config.errors import format_validation_error
from config.gpu_quotas import GpuQuotasConfig, quota_warnings
from tests.gpu_platform.quota_rules import KUBEFLOW, TEAM, quotas


class _Stack(ConfigModel):
    """The key as it sits in the stack config, so error messages carry the full `gpu-pool:gpuQuotas...` path."""

    gpu_quotas: GpuQuotasConfig = Field(default_factory=GpuQuotasConfig)


def _errors(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        _Stack.model_validate({"gpuQuotas": raw})
    return format_validation_error(caught.value)


# --- Pulumi-owned quotas -----------------------------------------------------------------------------------


def test_a_namespace_quota_caps_gpu_requests_with_the_requests_prefix() -> None:
    quota = build_resource_quota("kubeflow-user", 2, name="gpu-quota")
    assert quota["apiVersion"] == "v1" and quota["kind"] == "ResourceQuota"
    assert quota["metadata"]["name"] == "gpu-quota"
    assert quota["metadata"]["namespace"] == "kubeflow-user"
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "2"}}


def test_a_quota_never_names_gpu_limits_which_kubernetes_refuses_for_extended_resources() -> None:
    assert not any(key.startswith("limits.") for key in build_resource_quota("a", 1, name="q")["spec"]["hard"])


def test_a_zero_quota_forbids_gpus_in_thenamespace() -> None:
    assert build_resource_quota("batch", 0, name="gpu-quota")["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_a_negative_quota_is_refused_by_the_builder_too() -> None:
    with pytest.raises(ValueError, match="batch"):
        build_resource_quota("batch", -1, name="gpu-quota")


def test_explicit_namespaces_become_quotas_sorted_by_namespace_with_the_configured_name() -> None:
    cfg = quotas(namespaces={"zeta": 1, "alpha": 3, "mid": 0}, quotaName="gpu-cap")
    built = build_gpu_quotas(cfg)
    assert [q["metadata"]["namespace"] for q in built] == ["alpha", "mid", "zeta"]
    assert [q["spec"]["hard"]["requests.nvidia.com/gpu"] for q in built] == ["3", "0", "1"]
    assert {q["metadata"]["name"] for q in built} == {"gpu-cap"}
    assert build_gpu_quotas(cfg) == built


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


def test_a_selector_rule_with_no_labels_is_refused_because_it_would_match_everynamespace() -> None:
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
    cfg = quotas(namespaces={"big": 9, "fits": 9 - 0}, selectors=[{**KUBEFLOW, "maxGpus": 10}])
    warnings = quota_warnings(cfg, schedulable_slots=9)
    assert len(warnings) == 1
    assert warnings[0].startswith("gpu-pool:gpuQuotas.selectors[0].maxGpus:")
    warnings = quota_warnings(cfg, schedulable_slots=8)
    assert [w.split(":")[1] for w in warnings] == [
        "gpuQuotas.namespaces.big",
        "gpuQuotas.namespaces.fits",
        "gpuQuotas.selectors[0].maxGpus",
    ]


def test_quotas_within_the_pool_do_not_warn() -> None:
    # The article's plan: dc1 and dc2 time-sliced x4, dc3 whole = 9 schedulable GPUs.
    assert quota_warnings(quotas(namespaces={"a": 9, "b": 0}, selectors=[TEAM]), schedulable_slots=9) == []
