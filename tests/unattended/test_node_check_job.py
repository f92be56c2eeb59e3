"""The in-cluster node-check Job: pinned to its node, read-only host mounts of exactly what node-check reads that a
container does not see by itself, no capability but SYSLOG (dmesg), no service account token, in a namespace
labelled privileged; its command line is one node-check's own parser accepts."""

from __future__ import annotations

import argparse
from typing import Any

import kubernetes_validate

from components.unattended.node_check_job import (
    CODE_KEY,
    node_check_code,
    node_check_job,
    node_check_namespace,
)
from config.repair import UnattendedConfig
from day2.node_check.command import add_arguments

CFG = UnattendedConfig()
FLAGS = ["--expect-id", "10de:2335", "--expect-subsystem", "10de:18be", "--proxmox-node", "pve-dc1", "--vm-id", "4101"]


def job() -> dict[str, Any]:
    return node_check_job(CFG, "rke2-worker-dc1-gpu-a", FLAGS, "node-check-dc1-1")


def test_the_job_and_its_namespace_validate_strictly_against_the_kubernetes_schema() -> None:
    version = kubernetes_validate.latest_version()
    for obj in (job(), node_check_namespace(CFG), node_check_code(CFG, b"zip")):
        kubernetes_validate.validate(obj, version, strict=True)


def test_it_runs_on_its_node_only_and_tolerates_the_cordon() -> None:
    spec = job()["spec"]["template"]["spec"]

    assert spec["nodeName"] == "rke2-worker-dc1-gpu-a" and spec["tolerations"] == [{"operator": "Exists"}]
    assert job()["spec"]["backoffLimit"] == 0


def test_it_mounts_only_run_nvidia_and_the_machine_id_from_the_host_and_all_read_only() -> None:
    spec = job()["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = spec["containers"][0]["volumeMounts"]

    assert sorted(host.values()) == ["/etc/machine-id", "/run/nvidia"]
    assert all(m["readOnly"] for m in mounts)


def test_it_holds_no_capability_but_syslog_no_token_and_a_read_only_root() -> None:
    spec = job()["spec"]["template"]["spec"]
    context = spec["containers"][0]["securityContext"]

    assert context["capabilities"] == {"drop": ["ALL"], "add": ["SYSLOG"]}
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False and "privileged" not in context


def test_its_namespace_is_labelled_privileged_apart_from_the_watchers_restricted_one() -> None:
    labels = node_check_namespace(CFG)["metadata"]["labels"]

    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert CFG.node_check_namespace != CFG.namespace


def test_node_checks_own_parser_accepts_the_command_line() -> None:
    command = job()["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["python3", f"/opt/gpu-pool/{CODE_KEY}"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    args = parser.parse_args(command[2:])

    assert (args.output, args.node, str(args.etc_root)) == ("json", "rke2-worker-dc1-gpu-a", "/host/etc")
    assert args.expect_id == ["10de:2335"] and args.vm_id == 4101
