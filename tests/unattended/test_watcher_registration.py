"""What `repair.unattended.enabled` registers in the cluster for the watcher: its namespace under Pod Security
restricted and the node-check Jobs' under privileged, the code and facts it runs, and one Deployment (one replica,
Recreate, the pinned image) that starts once its Roles, token Secret and code are there."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

from components.stack_check import validate_stack
from components.unattended.node_check_job import CODE_CONFIGMAP as NODE_CHECK_CODE
from components.unattended.node_check_job import CODE_KEY as NODE_CHECK_KEY
from components.unattended.node_check_job import node_check_zip
from components.unattended.watcher import CODE_CONFIGMAP, CODE_KEY, FACTS_KEY, watcher_zip
from day2.bundle import node_check_zip as ssh_node_check_zip
from day2.repair.watcher_core import WatcherFacts
from offline.recording import RecordingMonitor, reveal
from offline.runner import read_stack_file
from tests.unattended.registered import register_unattended

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NAMESPACE = "kubernetes:core/v1:Namespace"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def stack() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})


def test_one_watcher_runs_recreated_never_two_in_the_pinned_image_as_nobody(monitor: RecordingMonitor) -> None:
    cfg = stack()
    recording = register_unattended(monitor, cfg)

    (deployment,) = recording.by_type(DEPLOYMENT)
    spec = reveal(deployment.inputs)["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert container["image"] == cfg.repair.unattended.image == cfg.repair.health_check.image
    assert pod["serviceAccountName"] == "gpu-pool-repair"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # It starts once what it uses is there: its Roles and bindings, the token's Secret, its code.
    depends = set(deployment.dependencies)
    needed = [r for r in recording.registrations if r.type.endswith(("Role", "RoleBinding", ":Secret"))]
    assert needed and {r.urn for r in needed} <= depends


def test_the_watchers_namespace_is_restricted_and_the_node_checks_privileged(monitor: RecordingMonitor) -> None:
    recording = register_unattended(monitor, stack())

    levels = {
        reveal(r.inputs)["metadata"]["name"]: reveal(r.inputs)["metadata"]["labels"][
            "pod-security.kubernetes.io/enforce"
        ]
        for r in recording.by_type(NAMESPACE)
    }
    assert levels == {"gpu-pool-repair": "restricted", "gpu-pool-node-check": "privileged"}


def test_the_watcher_runs_the_shipped_zip_with_the_stacks_facts(monitor: RecordingMonitor) -> None:
    cfg = stack()
    recording = register_unattended(monitor, cfg)

    code = reveal(recording.named("unattended-repair-code").inputs)
    assert base64.b64decode(code["binaryData"][CODE_KEY]) == watcher_zip()
    facts = WatcherFacts.from_json(json.loads(code["data"][FACTS_KEY]))
    assert [d.hostname for d in facts.unattended.domains] == [d.hostname for d in cfg.failure_domains]
    assert facts.vms["dc1"].vmid == str(cfg.failure_domains[0].vm_id)
    assert set(facts.node_check_jobs) == {d.hostname for d in cfg.failure_domains}
    assert code["metadata"]["name"] == CODE_CONFIGMAP


def test_the_node_check_job_runs_the_same_zip_gpu_pool_repair_sends_over_ssh(monitor: RecordingMonitor) -> None:
    recording = register_unattended(monitor, stack())

    code = reveal(recording.named("unattended-repair-node-check-code").inputs)
    assert code["metadata"]["name"] == NODE_CHECK_CODE
    assert base64.b64decode(code["binaryData"][NODE_CHECK_KEY]) == node_check_zip() == ssh_node_check_zip()


def test_every_registered_kubernetes_object_validates_strictly_against_the_schema(monitor: RecordingMonitor) -> None:
    recording = register_unattended(monitor, stack())
    version = kubernetes_validate.latest_version()

    checked = 0
    for r in recording.registrations:
        # Custom resources are the Prometheus Operator's: the PrometheusRule is evaluated by promtool
        # (test_alerts_promtool.py); the pinned upstream data holds no ServiceMonitor schema.
        if not r.type.startswith("kubernetes:") or r.type.endswith((":Secret", "Provider")) or "coreos" in r.type:
            continue
        obj = reveal(r.inputs)
        api_version = r.type.split(":")[1].removeprefix("core/")
        kind = r.type.split(":")[2]
        kubernetes_validate.validate({"apiVersion": api_version, "kind": kind, **obj}, version, strict=True)
        checked += 1
    assert checked >= 12


def test_the_watchers_metrics_are_scraped_and_its_alerts_registered_where_monitoring_asks(
    monitor: RecordingMonitor,
) -> None:
    from components.unattended.alerts import BREAKER_OPEN, REPAIRS

    recording = register_unattended(monitor, stack())

    service = reveal(recording.named("unattended-repair-service").inputs)
    deployment = reveal(recording.by_type(DEPLOYMENT)[0].inputs)
    (port,) = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"] == "metrics"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    rules = reveal(recording.named("unattended-repair-alerts").inputs)
    exprs = " ".join(r["expr"] for g in rules["spec"]["groups"] for r in g["rules"])
    assert BREAKER_OPEN in exprs and REPAIRS in exprs


def test_the_metric_names_and_port_the_watcher_serves_are_the_ones_its_alerts_and_service_read() -> None:
    from components.unattended import alerts, watcher
    from day2.repair import watcher as loop

    assert (loop.REPAIRS_METRIC, loop.REFUSALS_METRIC, loop.BREAKER_METRIC) == alerts.METRICS
    assert loop.METRICS_PORT == watcher.METRICS_PORT


def test_the_node_check_jobs_command_prints_a_report_the_watcher_reads(tmp_path: Path) -> None:
    """The Job's own command line (flags included) run with the shipped zip and every site package hidden, on the
    lent H200's capture instead of the live node: its stdout is a report the watcher parses."""
    from day2.doctor.node_report import parse_node_check
    from tests.day2.test_repair_decision import EXAMPLES, H200

    raw_stack = {k.split(":", 1)[1]: v for k, v in read_stack_file("h200-lab", EXAMPLES).items()}
    cfg = validate_stack(raw_stack | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})
    facts = WatcherFacts.from_json(json.loads(json.dumps(_facts(cfg))))
    job = facts.node_check_jobs["rke2-worker-dc2-gpu-a"]
    command = list(job["spec"]["template"]["spec"]["containers"][0]["command"])
    (tmp_path / "node-check.pyz").write_bytes(node_check_zip())
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "machine-id").write_text("0123456789abcdef0123456789abcdef\n", encoding="utf-8")
    argv = [
        sys.executable,
        "-S",
        "-E",
        "-s",
        str(tmp_path / "node-check.pyz"),
        *[a for a in command[2:] if a != "/host/etc"],
        "--sysfs-root",
        str(H200 / "sys"),
        "--proc-root",
        str(H200 / "proc"),
        "--kernel-log",
        str(H200 / "dmesg.txt"),
        "--nvml-json",
        str(H200 / "nvml.json"),
    ]
    argv[argv.index("--etc-root") + 1 : argv.index("--etc-root") + 1] = [str(tmp_path / "etc")]

    done = subprocess.run(argv, capture_output=True, text=True, check=False)

    assert done.returncode in (0, 1), done.stderr
    report = parse_node_check(json.loads(done.stdout), "(the Job's log)")
    assert report.node == "rke2-worker-dc2-gpu-a"
    assert report.first_broken is None, report.floors


def _facts(cfg: Any) -> dict[str, Any]:
    from components.gpu_platform.health_check import pool_facts_document
    from components.unattended.watcher_facts import watcher_facts_document

    return watcher_facts_document(cfg, "h200-lab", pool_facts_document(cfg, "h200-lab"))
