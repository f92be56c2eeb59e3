"""Every Kubernetes object a stack's preview writes is one the API server (or the CRD) accepts as written.

The prod stack by default; `make check STACK=<yours>` runs it on another (GPU_POOL_CHECK_STACK, and
GPU_POOL_CHECK_STACK_DIR for a stack file outside the project).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from offline.preview import main
from tests.contract import crd_schemas

CUSTOM_KINDS = {
    "ClusterPolicy": crd_schemas.KYVERNO_CLUSTER_POLICY_CRD,
    "MutatingPolicy": crd_schemas.KYVERNO_MUTATING_POLICY_CRD,
    "GeneratingPolicy": crd_schemas.KYVERNO_GENERATING_POLICY_CRD,
    "ValidatingPolicy": crd_schemas.KYVERNO_VALIDATING_POLICY_CRD,
    "PrometheusRule": crd_schemas.PROMETHEUS_RULE_CRD,
}


STACK = os.environ.get("GPU_POOL_CHECK_STACK", "prod")
STACK_DIR = os.environ.get("GPU_POOL_CHECK_STACK_DIR", "")


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp(STACK)
    where = ["--stack-dir", STACK_DIR] if STACK_DIR else []
    assert main(["--stack", STACK, *where, "--out", str(out), "--quiet"]) == 0, f"the {STACK} stack does not preview"
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted((out / "manifests").glob("*.yaml"))}


@pytest.mark.skipif(STACK != "prod", reason="what prod must contain")
def test_the_prod_preview_writes_every_kind_the_gpu_tier_needs(manifests: dict[str, dict[str, Any]]) -> None:
    kinds = {obj["kind"] for obj in manifests.values()}
    assert kinds >= {"Namespace", "ConfigMap", "MutatingPolicy", "GeneratingPolicy", "PrometheusRule", "Job", "Node"}
    assert "ResourceQuota" in kinds and "ClusterPolicy" not in kinds  # Kyverno's CEL policy types by default


def test_every_core_object_validates_strictly_against_the_kubernetes_schema(
    manifests: dict[str, dict[str, Any]],
) -> None:
    version = kubernetes_validate.latest_version()
    for name, obj in manifests.items():
        if obj["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:  # pragma: no cover - the message is the point
            pytest.fail(f"{name}: {error}")


def test_every_custom_resource_validates_strictly_against_its_crd(
    manifests: dict[str, dict[str, Any]], upstream: Path
) -> None:
    validators = {kind: crd_schemas.strict_validator(upstream, crd) for kind, crd in CUSTOM_KINDS.items()}
    checked = 0
    for name, obj in manifests.items():
        if obj["kind"] in validators:
            problems = [e.message for e in validators[obj["kind"]].iter_errors(obj)]
            assert not problems, f"{name}: {problems}"
            checked += 1
    if STACK == "prod":
        assert checked == 4  # steering policy, multi-GPU refusal, quota generating policy, alert rules
