"""What `reclaim.idleNotebooks.enabled` registers, through the real program: exactly the objects the pure plan holds
(components/reclaim/objects.py), under one NotebookReclaim component; its account limited to its table's requests;
its pod restricted, one at a time, restarted when its code or facts change; its code the packed policy, which runs with
every site package hidden."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

from components.gpu_platform.alert_rules import prometheus_rule_labels
from components.reclaim.names import NAME
from components.reclaim.objects import CODE_KEY, FACTS_KEY, plan_objects, policy_zip
from components.stack_check import validate_stack
from config.reclaim import IdleNotebooksConfig
from day2.reclaim.policy import PolicyFacts
from offline.recording import Recording, reveal
from offline.runner import read_stack_file
from tests.config.refusal import Run

PROMETHEUS = "http://rancher-monitoring-prometheus.cattle-monitoring-system.svc:9090"
COMPONENT = "gpu-pool:index:NotebookReclaim"
ENABLED = {"idleNotebooks": {"enabled": True, "prometheusUrl": PROMETHEUS, "maxPerHour": 1}}


def stack() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    return validate_stack(raw | {"reclaim": ENABLED})


def registered(run: Run, prod_config: dict[str, Any]) -> tuple[Recording, list[Any]]:
    prod_config["gpu-pool:reclaim"] = ENABLED
    recording = run(prod_config)
    (component,) = recording.by_type(COMPONENT)
    return recording, [r for r in recording.registrations if r.parent == component.urn]


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def test_the_program_registers_exactly_the_planned_objects(run_stack_program: Run, prod_config: dict[str, Any]) -> None:
    _, children = registered(run_stack_program, prod_config)
    cfg = stack()
    planned = plan_objects(
        cfg.reclaim.idle_notebooks, cfg.monitoring, prometheus_rule_labels(cfg.monitoring), policy_zip()
    )

    got = {}
    for child in children:
        inputs = reveal(child.inputs)
        kind = child.type.rsplit(":", 1)[-1] if "CustomResource" not in child.type else inputs["kind"]
        got[(kind, inputs["metadata"].get("namespace", ""), inputs["metadata"]["name"])] = inputs
    assert set(got) == {identity(o) for o in planned.all()}
    for obj in planned.all():
        registered_obj = got[identity(obj)]
        for key in ("spec", "rules", "data", "binaryData", "roleRef", "subjects"):
            assert registered_obj.get(key) == obj.get(key), (identity(obj), key)


def test_nothing_is_registered_for_the_policy_while_it_is_off(
    run_stack_program: Run, prod_config: dict[str, Any]
) -> None:
    recording = run_stack_program(prod_config)

    assert recording.by_type(COMPONENT) == []
    assert not [r for r in recording.registrations if NAME in json.dumps(reveal(r.inputs), default=str)]


def test_its_account_may_only_list_the_pool_patch_notebooks_and_post_events() -> None:
    cfg = stack()
    planned = plan_objects(cfg.reclaim.idle_notebooks, cfg.monitoring, {}, b"")
    (role,) = [o for o in planned.all() if o["kind"] == "ClusterRole"]

    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["notebooks"], "verbs": ["list", "patch"]},
    ]
    (binding,) = [o for o in planned.all() if o["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "gpu-pool-reclaim"}]


def test_one_policy_runs_recreated_restricted_and_restarts_when_its_code_or_facts_change() -> None:
    cfg = stack().reclaim.idle_notebooks
    planned = plan_objects(cfg, stack().monitoring, {}, policy_zip())
    (namespace,) = [o for o in planned.all() if o["kind"] == "Namespace"]
    spec = planned.deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]

    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert pod["serviceAccountName"] == NAME and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    other = cfg.model_copy(update={"max_per_hour": 3})
    digest = spec["template"]["metadata"]["annotations"]
    assert (
        plan_objects(other, stack().monitoring, {}, policy_zip()).deployment["spec"]["template"]["metadata"][
            "annotations"
        ]
        != digest
    )


def test_its_facts_are_the_configs_values_and_its_code_the_packed_policy() -> None:
    cfg = stack().reclaim.idle_notebooks
    planned = plan_objects(cfg, stack().monitoring, {}, policy_zip())
    (code,) = [o for o in planned.all() if o["kind"] == "ConfigMap"]
    facts = PolicyFacts.from_json(json.loads(code["data"][FACTS_KEY]))

    assert base64.b64decode(code["binaryData"][CODE_KEY]) == policy_zip()
    assert (facts.prometheus_url, facts.policy.max_per_hour, facts.dry_run) == (PROMETHEUS, 1, False)
    assert facts.policy.idle_hours == cfg.idle_hours and facts.check_every_minutes == cfg.check_every_minutes


def test_the_packed_policy_runs_with_every_site_package_hidden(tmp_path: Path) -> None:
    (tmp_path / CODE_KEY).write_bytes(policy_zip())
    document = IdleNotebooksConfig.model_validate(ENABLED["idleNotebooks"]).model_dump(mode="json", by_alias=True)
    (tmp_path / FACTS_KEY).write_text(json.dumps(document), encoding="utf-8")

    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", CODE_KEY, "--facts", FACTS_KEY, "--once", "--metrics-port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )

    # Every module it imports loaded; outside a pod it says it has no ServiceAccount to call the API with.
    assert done.returncode == 2, done.stderr
    assert "KUBERNETES_SERVICE_HOST is not set" in done.stdout


def test_every_registered_kubernetes_object_validates_strictly_against_the_schema(
    run_stack_program: Run, prod_config: dict[str, Any]
) -> None:
    _, children = registered(run_stack_program, prod_config)
    version = kubernetes_validate.latest_version()

    checked = 0
    for child in children:
        # The Prometheus Operator's kinds: the PrometheusRule is evaluated by promtool (test_alerts_promtool.py).
        if "coreos" in child.type:
            continue
        api_version = child.type.split(":")[1].removeprefix("core/")
        kind = child.type.split(":")[2]
        kubernetes_validate.validate(
            {"apiVersion": api_version, "kind": kind, **reveal(child.inputs)}, version, strict=True
        )
        checked += 1
    assert checked == 7


def test_the_offline_preview_says_what_the_policy_runs_and_may_do_only_when_it_is_on() -> None:
    from offline.preview import reclaim_note

    note = reclaim_note({"gpu-pool:reclaim": ENABLED})

    assert note.startswith("Notebook reclaim (gpu-pool:reclaim.idleNotebooks):")
    assert "Deployment gpu-pool-reclaim/gpu-pool-reclaim (1 replica, Recreate" in note and PROMETHEUS in note
    assert "patch notebooks (any namespace)" in note and "delete" not in note
    assert reclaim_note({}) == "" and reclaim_note({"gpu-pool:reclaim": {"idleNotebooks": {"dryRun": True}}}) == ""
