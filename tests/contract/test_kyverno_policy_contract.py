"""The ClusterPolicies against the Kyverno v1.19 CRD schema, strictly; GPU quotas against Kubernetes' schema.

The API server prunes fields a structural CRD schema does not know, silently: a misspelt or misplaced field
would vanish and, for example, the fail-closed scope of the webhook with it. So the schema is made strict
here (no unknown fields wherever the CRD lists properties and does not preserve unknown fields).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the dev group
import kubernetes_validate
import pytest

from components.gpu_platform.cpu_guard_policy import build_cpu_guard_policy
from components.gpu_platform.multi_gpu import WholeCards
from components.gpu_platform.quota_policy import build_gpu_quota_generate_policy
from components.gpu_platform.quotas import build_gpu_quotas, build_resource_quota
from components.gpu_platform.steering_policy import build_gpu_steering_policy, build_multi_gpu_policy
from config.gpu_quotas import GpuQuotasConfig
from config.kyverno import KyvernoConfig
from tests.contract import crd_schemas
from tests.gpu_platform.kyverno_admission import generated
from tests.gpu_platform.quota_rules import KUBEFLOW, KUBEFLOW_LABELS, TEAM, namespace

CRD = crd_schemas.KYVERNO_CLUSTER_POLICY_CRD
KUBERNETES_VERSIONS = sorted({"1.33", kubernetes_validate.latest_version()})


@pytest.fixture(scope="module")
def crd_schema(upstream: Path) -> dict[str, Any]:
    schema = crd_schemas.crd_schema(upstream, CRD)
    assert schema["properties"]["kind"]["type"] == "string"
    return schema


@pytest.fixture(scope="module")
def validator(crd_schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schemas.strict(crd_schema))


# Two whole profiles, so the multi-GPU steering rule and the refusal are both in the documents checked.
WHOLE = WholeCards(profiles=("whole", "whole-a100"), domains=(("gpu-a", 2), ("gpu-b", 1)), smoke_namespace="gpu-smoke")


def _policies() -> dict[str, dict[str, Any]]:
    quota_policy = build_gpu_quota_generate_policy(GpuQuotasConfig.model_validate({"selectors": [KUBEFLOW, TEAM]}))
    assert quota_policy is not None
    # An explicit namespace adds each rule's `exclude` by name (an explicit entry wins over a label rule).
    with_explicit = build_gpu_quota_generate_policy(
        GpuQuotasConfig.model_validate({"namespaces": {"alice": 2}, "selectors": [KUBEFLOW, TEAM]})
    )
    assert with_explicit is not None and "exclude" in with_explicit["spec"]["rules"][0]
    cpu_guard = build_cpu_guard_policy(
        KyvernoConfig.model_validate({"minCpuPerGpu": "1"}), operator_namespace="gpu-operator"
    )
    assert cpu_guard is not None
    return {
        "steering": build_gpu_steering_policy(KyvernoConfig(), operator_namespace="gpu-operator", whole=WHOLE),
        "steering, custom": build_gpu_steering_policy(
            KyvernoConfig.model_validate({"failurePolicy": "Ignore", "taintEffect": "NoExecute"}),
            operator_namespace="nvidia",
            whole=WholeCards(profiles=(), domains=(), smoke_namespace="gpu-smoke-test"),
        ),
        "multi-gpu refusal": build_multi_gpu_policy(KyvernoConfig(), operator_namespace="gpu-operator", whole=WHOLE),
        "quota generate": quota_policy,
        "quota generate, explicit namespaces": with_explicit,
        "cpu guard": cpu_guard,
    }


def _problems(validator: jsonschema.Draft7Validator, document: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


@pytest.mark.parametrize("name", sorted(_policies()))
def test_the_policy_validates_strictly_against_the_kyverno_v1_19_crd(
    validator: jsonschema.Draft7Validator, name: str
) -> None:
    document = _policies()[name]
    assert document["apiVersion"] == "kyverno.io/v1"
    assert _problems(validator, document) == []


@pytest.mark.parametrize(
    ("path", "right", "wrong"),
    [
        (["spec", "webhookConfiguration"], "failurePolicy", "failurPolicy"),
        (["spec", "rules", 0], "preconditions", "preconditons"),
        (["spec", "rules", 0, "match", "any", 0, "resources"], "operations", "operation"),
        (["spec", "rules", 6, "mutate", "foreach", 0], "patchesJson6902", "patchesJson6092"),
    ],
)
def test_a_misspelt_field_is_rejected_by_the_strict_schema(
    validator: jsonschema.Draft7Validator, path: list[Any], right: str, wrong: str
) -> None:
    document = copy.deepcopy(_policies()["steering"])
    parent = document
    for part in path:
        parent = parent[part]
    parent[wrong] = parent.pop(right)
    problems = _problems(validator, document)
    assert problems and all(wrong in problem for problem in problems)


def test_generate_existing_in_the_wrong_place_is_rejected(validator: jsonschema.Draft7Validator) -> None:
    document = copy.deepcopy(_policies()["quota generate"])
    document["spec"]["rules"][0]["generateExisting"] = document["spec"]["rules"][0]["generate"].pop("generateExisting")
    assert _problems(validator, document)


def _deprecated_fields_used(document: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(document, dict) and "properties" in schema:
        for key, value in document.items():
            child = schema["properties"].get(key)
            if child is None:
                continue
            if str(child.get("description", "")).lower().startswith("deprecated"):
                found.append(f"{path}.{key}")
            found += _deprecated_fields_used(value, child, f"{path}.{key}")
    elif isinstance(document, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(document):
            found += _deprecated_fields_used(item, schema["items"], f"{path}[{index}]")
    return found


@pytest.mark.parametrize("name", sorted(_policies()))
def test_the_policy_uses_no_field_the_crd_marks_deprecated(crd_schema: dict[str, Any], name: str) -> None:
    # e.g. spec.failurePolicy, spec.webhookTimeoutSeconds, spec.generateExisting: moved in Kyverno 1.13.
    assert _deprecated_fields_used(_policies()[name], crd_schema) == []


def test_the_deprecation_check_does_see_a_deprecated_field(crd_schema: dict[str, Any]) -> None:
    document = copy.deepcopy(_policies()["steering"])
    document["spec"]["failurePolicy"] = "Fail"
    assert _deprecated_fields_used(document, crd_schema) == [".spec.failurePolicy"]


def test_the_webhook_fields_the_policy_relies_on_exist_in_the_crd(crd_schema: dict[str, Any]) -> None:
    hook = crd_schema["properties"]["spec"]["properties"]["webhookConfiguration"]["properties"]
    assert {"failurePolicy", "timeoutSeconds", "matchConditions"} <= set(hook)
    generate = crd_schema["properties"]["spec"]["properties"]["rules"]["items"]["properties"]["generate"]
    assert "generateExisting" in generate["properties"]


# --- ResourceQuota against the Kubernetes schema ------------------------------------------------------------


def _quota_objects() -> list[dict[str, Any]]:
    quotas = GpuQuotasConfig.model_validate({"namespaces": {"kubeflow-user": 2, "batch": 0}, "selectors": [KUBEFLOW]})
    policy = build_gpu_quota_generate_policy(quotas)
    assert policy is not None
    made = generated(policy, namespace("alice", KUBEFLOW_LABELS))
    assert made
    return [*build_gpu_quotas(quotas), *made]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_gpu_quota_validates_strictly_against_the_kubernetes_schema(version: str) -> None:
    for quota in _quota_objects():
        kubernetes_validate.validate(quota, version, strict=True)


def test_the_kubernetes_schema_check_rejects_a_misspelt_quota_field() -> None:
    quota = build_resource_quota("a", 1, name="gpu-quota")
    quota["spec"]["hrad"] = quota["spec"].pop("hard")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(quota, kubernetes_validate.latest_version(), strict=True)
