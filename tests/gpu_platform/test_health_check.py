"""The optional in-cluster health check: valid Kubernetes objects with the least privilege the check needs, a
stock image running code the stack ships itself (standard library only), the verdict as a Node condition."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components.gpu_platform.health_check import (
    CODE_KEY,
    FACTS_KEY,
    NAME,
    HealthCheckBundle,
    build_health_alert_rules,
    build_health_check,
    health_check_files,
    health_check_zip,
    pool_facts_document,
)
from components.shared.health_condition import CONDITION
from components.stack_check import validate_stack
from config.monitoring import MonitoringConfig
from config.repair import HealthCheckConfig, longest_gap_minutes
from day2.doctor.health_check import condition_of, reason_of
from day2.doctor.walk import diagnose_all
from day2.pool import facts_from_document, facts_of
from day2.sources import load_dump
from offline.runner import read_stack_file
from tests.contract import crd_schemas
from tests.day2.pool_facts import facts_document

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-05-04T10:00:00Z"


def prod_with_health_check() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}}})


def objects(smoke: bool = True) -> list[dict[str, Any]]:
    cfg = prod_with_health_check()
    bundle = HealthCheckBundle(b"zip", json.dumps(facts_document(facts_of(cfg, "prod"))))
    return build_health_check(
        cfg.repair.health_check,
        bundle,
        operator_namespace="gpu-operator",
        time_slicing_configmap="time-slicing-config",
        smoke_namespace="gpu-smoke-test" if smoke else None,
    )


def test_every_object_validates_strictly_against_the_kubernetes_schema() -> None:
    version = kubernetes_validate.latest_version()
    for obj in objects():
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_alert_rule_validates_against_the_prometheus_rule_crd(upstream: Path) -> None:
    rule = build_health_alert_rules(MonitoringConfig(), HealthCheckConfig(), stack="prod", labels={})
    crd_schemas.strict_validator(upstream, crd_schemas.PROMETHEUS_RULE_CRD).validate(rule)


def test_the_check_may_list_nodes_and_patch_their_status_and_read_only_what_doctor_reads() -> None:
    by_kind = {(o["kind"], o["metadata"].get("namespace")): o for o in objects()}

    assert by_kind[("ClusterRole", None)]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    assert by_kind[("Role", "gpu-operator")]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["time-slicing-config"]},
    ]
    assert by_kind[("Role", "gpu-smoke-test")]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}
    ]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in [o for o in objects() if o["kind"] == kind]:
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "gpu-pool-health"}]
    # Without the smoke test there are no smoke Jobs to read, and no Role for them.
    assert ("Role", "gpu-smoke-test") not in {(o["kind"], o["metadata"].get("namespace")) for o in objects(False)}


def test_the_cronjob_runs_the_shipped_zip_in_the_stock_image_under_the_restricted_pod_security_standard() -> None:
    (namespace,) = [o for o in objects() if o["kind"] == "Namespace"]
    (cronjob,) = [o for o in objects() if o["kind"] == "CronJob"]
    (configmap,) = [o for o in objects() if o["kind"] == "ConfigMap"]
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]

    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert container["image"] == "python:3.12-slim"
    assert container["command"] == ["python3", f"/opt/gpu-pool/{CODE_KEY}", "--facts", f"/opt/gpu-pool/{FACTS_KEY}"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["volumes"] == [{"name": "code", "configMap": {"name": NAME}}]
    assert base64.b64decode(configmap["binaryData"][CODE_KEY]) == b"zip"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


def test_the_zip_carries_exactly_the_checks_files_and_pyyaml_and_runs_with_every_site_package_hidden(
    tmp_path: Path,
) -> None:
    """What the pod has: python3 alone. A dump's cluster stands in for the API (the zip's code reads the same
    objects); here the check only has to start, parse its facts and reach for the API."""
    code = health_check_zip()
    names = zipfile.ZipFile(io.BytesIO(code)).namelist()
    assert {n for n in names if not n.startswith("yaml/")} == {
        *health_check_files(),
        "components/__init__.py",
        "__main__.py",
    }
    assert "yaml/__init__.py" in names and "yaml/LICENSE" in names
    assert not [n for n in names if n.endswith(".so")]
    assert health_check_zip() == code
    (tmp_path / "check.pyz").write_bytes(code)
    (tmp_path / "facts.json").write_text(json.dumps(facts_document(facts_of(prod_with_health_check(), "prod"))))
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "check.pyz", "--facts", "facts.json", "--server", "https://127.0.0.1:1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("gpu-pool health-check: GET /api/v1/nodes: ")
    assert "Traceback" not in done.stderr


def test_the_document_the_stack_writes_is_what_doctor_with_stack_reads_written_back() -> None:
    """One derivation of the facts from the config: doctor --stack reads the stack through the very document the
    stack writes into the health check's ConfigMap."""
    cfg = prod_with_health_check()

    assert facts_document(facts_of(cfg, "prod")) == pool_facts_document(cfg, "prod")
    assert json.loads(HealthCheckBundle.of(cfg, "prod").facts) == pool_facts_document(cfg, "prod")


def test_the_facts_the_stack_writes_are_the_facts_doctor_reads_with_the_stack() -> None:
    cfg = prod_with_health_check()
    facts = facts_of(cfg, "prod")

    read = facts_from_document(json.loads(json.dumps(facts_document(facts))))

    assert facts_document(read) == facts_document(facts)
    assert (read.domains, read.marking, read.profile_slots) == (facts.domains, facts.marking, facts.profile_slots)


def test_the_verdict_names_the_lowest_broken_floor_and_the_repair_command() -> None:
    facts = facts_of(prod_with_health_check(), "prod")
    broken = {d.node: d for d in diagnose_all(load_dump(str(ROOT / "examples/day2/broken-driver.json")), facts)}
    dc2 = broken["rke2-worker-dc2-gpu-a"]

    condition = condition_of(dc2, "prod", NOW, None)

    assert (condition["type"], condition["status"], condition["reason"]) == (CONDITION, "False", "DriverBroken")
    assert condition["message"].startswith("driver: nvidia-driver-daemonset-")
    assert condition["message"].endswith("; a faulted card: gpu-pool repair rke2-worker-dc2-gpu-a --stack prod")
    assert condition["lastTransitionTime"] == condition["lastHeartbeatTime"] == NOW


def test_the_transition_time_moves_only_when_the_verdict_does() -> None:
    facts = facts_of(prod_with_health_check(), "prod")
    healthy = diagnose_all(load_dump(str(ROOT / "examples/day2/healthy-pool.json")), facts)[0]
    before = {"type": CONDITION, "status": "True", "lastTransitionTime": "2026-05-01T00:00:00Z"}

    assert condition_of(healthy, "prod", NOW, before)["lastTransitionTime"] == "2026-05-01T00:00:00Z"
    assert condition_of(healthy, "prod", NOW, before | {"status": "False"})["lastTransitionTime"] == NOW
    assert condition_of(healthy, "prod", NOW, before)["reason"] == "AllFloorsOk"


@pytest.mark.parametrize(
    ("floor", "reason"),
    [("node", "NodeBroken"), ("sharing-config", "SharingConfigBroken"), ("node:health", "NodeHealthBroken")],
)
def test_a_condition_reason_is_the_floor_in_camel_case(floor: str, reason: str) -> None:
    assert reason_of(floor) == reason


@pytest.mark.parametrize(
    ("schedule", "minutes"),
    [("*/10 * * * *", 10), ("*/7 * * * *", 7), ("0 * * * *", 60), ("5 3 * * *", 1440), ("0,30 8-18 * * *", 810)],
)
def test_the_longest_wait_between_runs_follows_the_schedule(schedule: str, minutes: int) -> None:
    assert longest_gap_minutes(schedule) == minutes


@pytest.mark.parametrize("schedule", ["0 0 * * 1", "61 * * * *", "*/0 * * * *", "* * *", "@hourly"])
def test_a_schedule_that_is_not_daily_minutes_and_hours_is_refused(schedule: str) -> None:
    with pytest.raises(ValueError, match="schedule"):
        HealthCheckConfig.model_validate({"schedule": schedule})


def test_the_stack_ships_the_checks_zip_and_its_facts_in_the_configmap(
    run_stack_program: Any, prod_config: dict[str, Any]
) -> None:
    prod_config["gpu-pool:repair"] = {"healthCheck": {"enabled": True}}
    recording = run_stack_program(prod_config)
    configmap = recording.named("gpu-platform-health-configmap").inputs

    assert base64.b64decode(configmap["binaryData"][CODE_KEY]) == health_check_zip()
    facts = facts_from_document(json.loads(configmap["data"][FACTS_KEY]))
    # The stack's own name (the mocks call it "test"), in the facts and in the alert's runbook command alike.
    assert facts.stack and facts.domains[0].hostname == "rke2-worker-dc1-gpu-a"
    rules = recording.named("gpu-platform-health-alert-rules").inputs
    description = rules["spec"]["groups"][0]["rules"][0]["annotations"]["description"]
    assert f"gpu-pool repair {{{{ $labels.node }}}} --stack {facts.stack}" in description


def test_the_health_check_is_off_unless_asked_for(run_stack_program: Any, prod_config: dict[str, Any]) -> None:
    names = [r.name for r in run_stack_program(prod_config).registrations]

    assert not [name for name in names if "-health-" in name]
