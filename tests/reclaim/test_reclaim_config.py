"""`gpu-pool:reclaim.idleNotebooks`: off by default, its idle thresholds the GpuHeldWhileIdle alert's, refused without
the Prometheus it judges from and without the rules that record the per-card series, and every bad value refused
with its key named, through the real program so nothing is registered on a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from config.monitoring import AlertThresholds
from config.reclaim import IdleNotebooksConfig, ReclaimConfig
from tests.config.refusal import Run, refused

PROMETHEUS = "http://rancher-monitoring-prometheus.cattle-monitoring-system.svc:9090"


def test_the_policy_is_off_by_default_and_judges_idle_as_the_alert_does() -> None:
    policy = ReclaimConfig().idle_notebooks
    alert = AlertThresholds()

    assert policy.enabled is False and policy.dry_run is False
    assert (policy.idle_hours, policy.idle_utilisation_percent) == (
        alert.idle_gpu_hours,
        alert.idle_utilisation_percent,
    )
    assert policy.only_when_contended is True
    assert (policy.namespace, policy.image) == ("gpu-pool-reclaim", "python:3.12-slim")


def test_enabling_it_without_a_prometheus_is_refused_naming_the_key(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    prod_config["gpu-pool:reclaim"] = {"idleNotebooks": {"enabled": True}}

    message = refused(run_stack_program, prod_config, monitor)

    assert "reclaim.idleNotebooks.prometheusUrl is not set" in message


def test_enabling_it_without_the_gpu_prometheusrule_is_refused_naming_both_keys(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    prod_config["gpu-pool:reclaim"] = {"idleNotebooks": {"enabled": True, "prometheusUrl": PROMETHEUS}}
    prod_config["gpu-pool:monitoring"] = {"alertsEnabled": False}

    message = refused(run_stack_program, prod_config, monitor)

    assert "gpu-pool:reclaim.idleNotebooks.enabled" in message and "monitoring.alertsEnabled" in message


@pytest.mark.parametrize(
    ("value", "key", "fragment"),
    [
        ({"prometheusUrl": "http://admin:hunter2@prometheus:9090"}, "prometheusUrl", "must not carry credentials"),
        ({"prometheusUrl": "prometheus:9090"}, "prometheusUrl", "http(s) URL"),
        ({"prometheusUrl": "ftp://prometheus"}, "prometheusUrl", "http(s) URL"),
        ({"prometheusUrl": "http://prometheus:9090/?x=1"}, "prometheusUrl", "without a query"),
        ({"idleHours": 0}, "idleHours", "greater than or equal to 1"),
        ({"idleHours": "24"}, "idleHours", "valid integer"),
        ({"idleUtilisationPercent": 100}, "idleUtilisationPercent", "less than or equal to 99"),
        ({"graceMinutes": -1}, "graceMinutes", "greater than or equal to 0"),
        ({"exclusionLabel": "keep gpu"}, "exclusionLabel", "not a valid label name"),
        ({"maxPerHour": 0}, "maxPerHour", "greater than or equal to 1"),
        ({"checkEveryMinutes": 0}, "checkEveryMinutes", "greater than or equal to 1"),
        ({"cardBackMinutes": 0}, "cardBackMinutes", "greater than or equal to 1"),
        ({"dryRun": "yes"}, "dryRun", "valid boolean"),
        ({"onlyWhenContended": 1}, "onlyWhenContended", "valid boolean"),
        ({"image": "python:latest"}, "image", "pinned by tag or digest"),
        ({"namespace": "default"}, "namespace", "every cluster has"),
        ({"graceMinute": 5}, "graceMinute", "did you mean 'graceMinutes'"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(value: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as raised:
        IdleNotebooksConfig.model_validate(value)

    assert key in str(raised.value) and fragment in str(raised.value)


def test_a_bad_value_reaches_the_user_as_one_message_with_its_path(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    prod_config["gpu-pool:reclaim"] = {"idleNotebooks": {"maxPerHour": 0, "graceMinutes": -5}}

    message = refused(run_stack_program, prod_config, monitor)

    assert "reclaim.idleNotebooks.maxPerHour" in message and "reclaim.idleNotebooks.graceMinutes" in message


def test_credentials_in_the_url_are_refused_without_being_echoed(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    url = "http://admin:hunter2@prometheus.lab:9090"
    prod_config["gpu-pool:reclaim"] = {"idleNotebooks": {"enabled": True, "prometheusUrl": url}}

    message = refused(run_stack_program, prod_config, monitor)

    assert "reclaim.idleNotebooks.prometheusUrl: must not carry credentials" in message
    assert "hunter2" not in message


def test_an_enabled_policy_keeps_the_url_without_its_trailing_slash() -> None:
    policy = IdleNotebooksConfig.model_validate({"enabled": True, "prometheusUrl": PROMETHEUS + "/"})

    assert policy.prometheus_url == PROMETHEUS
