"""`gpuOperator.extraValues` is judged at preview by the schema each value meets at `up`: the ClusterPolicy CRD of
the pinned chart at the spec path the chart copies it to, and the image reference the operator composes from it.
Each refusal names the extraValues key; nothing is registered; every problem of the run comes together."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.operator_schema import dropped_false_warnings, image_problems_of, schema_problems_of
from knowledge.clusterpolicy_schema import (
    IMAGE_REFERENCE,
    composed_image,
    dropped_when_false,
    spec_paths,
    written_only_when_set,
)
from knowledge.gpu_operator_values import known_chart_versions
from offline.runner import read_stack_file
from tests.config.refusal import Run, refused

KEY = "gpu-pool:gpuOperator.extraValues"
CHART = "v26.7.0"


def _with_extra(config: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    config["gpu-pool:gpuOperator"] = {**config.get("gpu-pool:gpuOperator", {}), "extraValues": extra}
    return config


def test_a_repository_with_a_url_scheme_is_refused_naming_the_key_and_the_reference_pulled(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    extra = {"driver": {"repository": "https://nvcr.io/nvidia"}}

    message = refused(run_stack_program, _with_extra(prod_config, extra), monitor)

    assert f"{KEY}.driver.repository: the operator pulls \"https://nvcr.io/nvidia/<chart's image>" in message
    assert "without a URL scheme, e.g. nvcr.io/nvidia" in message


def test_image_pull_secrets_as_a_string_and_a_wrong_type_are_refused_together_at_their_spec_paths(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    extra = {
        "driver": {"imagePullSecrets": "regcred"},
        "migManager": {"env": [{"name": "WITH_REBOOT", "value": True}]},
        "validator": {"resources": {"limitz": {"memory": "1Gi"}}},
    }

    message = refused(run_stack_program, _with_extra(prod_config, extra), monitor)

    assert (
        f"{KEY}.driver.imagePullSecrets: lands in the ClusterPolicy's spec.driver.imagePullSecrets (chart "
        f"{CHART}'s CRD), which must be a list, not a string"
    ) in message
    assert f"{KEY}.migManager.env[0].value: lands in the ClusterPolicy's spec.migManager.env[0].value" in message
    assert "must be a string, not a boolean" in message
    assert f"{KEY}.validator.resources.limitz: lands in the ClusterPolicy's spec.validator.resources.limitz" in message
    assert (
        "is not a field of the ClusterPolicy here (it has: limits, requests): the API server would drop it" in message
    )


def test_a_value_the_chart_renames_is_judged_at_the_field_it_lands_in() -> None:
    # The chart writes driver.upgradePolicy.gpuPodDeletion into the ClusterPolicy's upgradePolicy.podDeletion.
    extra = {"driver": {"upgradePolicy": {"gpuPodDeletion": {"force": "yes"}}}}

    [problem] = schema_problems_of(extra, CHART)

    assert problem.startswith(f"{KEY}.driver.upgradePolicy.gpuPodDeletion.force: lands in the ClusterPolicy's ")
    assert "spec.driver.upgradePolicy.podDeletion.force" in problem and "must be true or false" in problem


def test_a_value_the_chart_quotes_reaches_the_clusterpolicy_as_text_and_is_taken() -> None:
    assert spec_paths(CHART)["daemonsets.rollingUpdate.maxUnavailable"] == (
        "daemonsets.rollingUpdate.maxUnavailable",
        True,
    )
    assert schema_problems_of({"daemonsets": {"rollingUpdate": {"maxUnavailable": 1}}}, CHART) == []


@pytest.mark.parametrize(
    "extra",
    [
        {"driver": {"repository": "registry.lab.internal:5000/nvidia", "version": "580.173.02"}},
        {"dcgmExporter": {"version": "sha256:" + "a" * 64}},
        {"toolkit": {"repository": "harbor.lab/mirror/nvidia", "image": "container-toolkit", "version": "v1.18.0"}},
        {"driver": {"imagePullSecrets": ["regcred"], "env": [{"name": "HTTP_PROXY", "value": "http://p:3128"}]}},
    ],
)
def test_values_the_crd_and_the_runtime_take_are_taken(extra: dict[str, Any]) -> None:
    assert schema_problems_of(extra, CHART) + image_problems_of(extra, CHART) == []


@pytest.mark.parametrize(
    ("repository", "image", "version"),
    [
        ("https://nvcr.io/nvidia", "driver", "580.173.02"),
        ("nvcr.io/NVIDIA", "driver", "580.173.02"),
        ("nvcr.io/nvidia/", "driver", "580.173.02"),
        ("nvcr.io/nvidia", "driver", "580 latest"),
        ("nvcr.io/nvidia", "driver", "sha256:abc"),
    ],
)
def test_a_reference_the_runtime_cannot_parse_is_not_an_image_reference(
    repository: str, image: str, version: str
) -> None:
    assert IMAGE_REFERENCE.match(composed_image(repository, image, version)) is None


def test_the_operator_composes_a_digest_with_an_at_sign_and_an_image_alone_as_it_is() -> None:
    digest = "sha256:" + "0" * 64
    assert composed_image("nvcr.io/nvidia", "driver", digest) == f"nvcr.io/nvidia/driver@{digest}"
    assert composed_image("", "nvcr.io/nvidia/driver@" + digest, "") == "nvcr.io/nvidia/driver@" + digest


# ------------------------------------------------------------------------- a false the chart never writes


def test_a_false_the_chart_drops_is_one_preview_warning_naming_the_key_and_why(
    run_stack_program: Run, prod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    extra = {"sandboxDevicePlugin": {"enabled": False}}

    assert run_stack_program(_with_extra(prod_config, extra)).registrations

    [warning] = [w for w in warnings if "sandboxDevicePlugin" in w]
    assert warning.startswith(f"{KEY}.sandboxDevicePlugin.enabled: false never reaches the ClusterPolicy: chart ")
    assert "writes spec.sandboxDevicePlugin.enabled only when true" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("extra", [{"sandboxDevicePlugin": {"enabled": True}}, {"sandboxDevicePlugin": {}}, {}])
def test_a_true_or_no_value_there_reaches_the_cluster_policy_and_is_no_warning(extra: dict[str, Any]) -> None:
    assert dropped_false_warnings(extra, CHART) == []


def test_the_dropped_false_table_is_what_the_template_guards_and_defaults_to_true() -> None:
    # Read off the chart's template by the same parser the data file is written with (the contract test
    # regenerates it from ../shared/upstream; tests/e2e/test_values_to_spec_contract.py runs helm on it).
    template = (
        "spec:\n  sandboxDevicePlugin:\n    {{- if .Values.sandboxDevicePlugin.enabled }}\n"
        "    enabled: {{ .Values.sandboxDevicePlugin.enabled }}\n    {{- end }}\n"
        "  driver:\n    enabled: {{ .Values.driver.enabled }}\n"
    )
    assert written_only_when_set(template) == ["sandboxDevicePlugin.enabled"]
    for version in known_chart_versions():
        assert dropped_when_false(version) == ("sandboxDevicePlugin.enabled",), version


@pytest.mark.parametrize("version", known_chart_versions())
def test_the_stacks_own_values_never_put_a_false_where_the_chart_drops_it(version: str) -> None:
    # gpu-pool's own release values must not depend on a false the chart never writes.
    raw = {k.removeprefix("gpu-pool:"): v for k, v in copy.deepcopy(read_stack_file("prod")).items()}
    stack = validate_stack(raw)
    values = release_values(stack.gpu_operator, stack.kyverno, stack.monitoring, driver_env={"HTTPS_PROXY": "x"})
    assert dropped_false_warnings(values, version) == []
