"""The program's objects on a real GPU node: a real kubelet, containerd, the NVIDIA Container Toolkit and the device
plugin, time-sliced on the lent card (tests/fixtures/gpu_node/, recorded by one call of the device tool: the
commands are in docs/verification.md, "On a real GPU: a real kubelet runs the program's pods"). CI has no GPU:
these tests replay what the node printed, and fail when the program renders something else than what ran.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from components.unattended.node_check_job import node_check_flags, node_check_job
from config.repair import UnattendedConfig
from knowledge.gpu_operator import GPU_RESOURCE
from offline.runner import ROOT_DIR
from tests import gpu_node_recording as recording
from tests.conftest import NO_UPSTREAM, upstream_dir
from tests.day2.k8s_objects import KUBERNETES_VERSION

FIXTURE = recording.FIXTURE
UUID = re.compile(r"GPU-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")
# The tests of what the node printed need the recording (docs/verification.md says how to make it).
RECORDED = pytest.mark.skipif(
    not (FIXTURE / "summary.json").exists(), reason="the GPU node run is not recorded (tests/fixtures/gpu_node/)"
)


def load(name: str) -> Any:
    return json.loads((FIXTURE / name).read_text())


def smoke_pods() -> dict[str, dict[str, Any]]:
    """The smoke Jobs' pods as the API server last reported them, by name."""
    return {path.stem: json.loads(path.read_text()) for path in sorted((FIXTURE / "pods").glob("cuda-smoke-*.json"))}


def card_uuid() -> str:
    """The card's UUID as nvidia-smi printed it on the machine, before any container ran."""
    found: set[str] = set(UUID.findall((FIXTURE / "machine.txt").read_text()))
    (uuid,) = found
    return uuid


def test_every_object_the_run_applies_is_valid_against_the_schema() -> None:
    objects = recording.program_objects()
    applied = [objects["time-slicing-config.json"], objects["runtimeclass.json"], objects["device-plugin-pod.json"]]
    applied += objects["namespaces.json"]["items"] + objects["smoke-jobs.json"]["items"]
    applied += [objects[name] for name in ("node-check-namespace.json", "node-check-code.json", "node-check-job.json")]
    for obj in applied:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_smoke_jobs_are_the_programs_job_with_only_name_image_and_pull_policy_changed() -> None:
    jobs = recording.program_objects()["smoke-jobs.json"]["items"]
    names = [job["metadata"]["name"] for job in jobs]
    base = names[0].rsplit("-", 1)[0]

    assert names == [f"{base}-{n}" for n in range(1, recording.JOBS + 1)]
    for job in jobs:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["image"] == recording.SMOKE_IMAGE
        assert container["imagePullPolicy"] == "Never"
        assert container["resources"] == {"limits": {GPU_RESOURCE: "1"}}
        assert job["spec"]["template"]["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_node_check_job_is_the_one_the_watcher_creates_with_only_name_image_and_pull_policy_changed() -> None:
    """The run starts the unattended repair's own Job for the domain's node (what the stack hands the watcher in its
    facts), not a look-alike: only what a node with no registry needs differs."""
    stack = recording._stack()
    domain = recording._domain(stack)
    watcher_job = node_check_job(
        UnattendedConfig(), domain.hostname, node_check_flags(stack, domain), f"node-check-{domain.hostname}"
    )
    run_job = copy.deepcopy(recording.program_objects()["node-check-job.json"])
    container = run_job["spec"]["template"]["spec"]["containers"][0]

    assert container.pop("imagePullPolicy") == "Never"
    assert container["image"] == recording.PYTHON_IMAGE
    container["image"] = UnattendedConfig().image
    run_job["metadata"]["name"] = watcher_job["metadata"]["name"]
    assert run_job == watcher_job


def test_the_toolkit_container_gets_rke2s_socket_and_the_default_config_paths_rke2_never_reads() -> None:
    """The program sets CONTAINERD_SOCKET alone: the operator mounts its folder, and the config and drop-in stay at
    the operator's defaults under /etc/containerd (knowledge/rke2.py: RKE2 registers the handlers itself)."""
    container = recording.toolkit_container(recording.rendered_toolkit_values(), "gpu-operator")
    mounts = {m["mountPath"]: m["hostPath"] for m in container["mounts"]}

    assert mounts["/runtime/sock-dir"] == "/run/k3s/containerd"
    assert mounts["/runtime/config-dir"] == "/etc/containerd"
    assert mounts["/runtime/config-dir.d"] == "/etc/containerd/conf.d"
    assert container["env"]["CONTAINERD_SOCKET"] == "/runtime/sock-dir/containerd.sock"
    assert container["env"]["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    assert container["env"]["CONTAINERD_RUNTIME_CLASS"] == "nvidia"


@RECORDED
def test_the_recording_is_of_the_toolkit_values_and_x4_document_the_program_renders_today() -> None:
    assert recording.stale_recording(load("digests.json")) == []


@RECORDED
@pytest.mark.parametrize("what", sorted(recording.digests()))
def test_a_changed_rendering_names_what_to_record_again(what: str) -> None:
    recorded = dict(load("digests.json"))
    recorded[what] = "0" * 64

    (problem,) = recording.stale_recording(recorded)

    assert what in problem
    assert "docs/verification.md" in problem
    assert "python -m tests.gpu_node_recording" in problem


def test_the_digests_follow_every_toolkit_value_and_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    today = recording.digests()
    values = recording.rendered_toolkit_values()
    values["toolkit"]["env"].append({"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"})
    monkeypatch.setattr(recording, "rendered_toolkit_values", lambda: values)
    monkeypatch.setattr(recording, "rendered_profile", lambda: "version: v1\n")

    changed = recording.digests()

    assert {key for key in today if today[key] != changed[key]} == set(today)


@RECORDED
def test_every_kubernetes_object_the_node_reported_is_valid_against_the_schema() -> None:
    objects = [load("node.json"), *load("pending.json")["items"], *load("dump.json")["items"]]
    objects += smoke_pods().values()
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert {obj["kind"] for obj in objects} >= {"Node", "Pod", "Job", "ConfigMap"}


@RECORDED
def test_the_real_kubelet_registered_the_node_with_the_programs_labels_taint_and_versions() -> None:
    node = load("node.json")
    spec = recording.program_objects()["node.json"]

    assert node["metadata"]["name"] == spec["name"]
    assert spec["labels"].items() <= node["metadata"]["labels"].items()
    assert [f"{t['key']}={t['value']}:{t['effect']}" for t in node["spec"]["taints"]] == [spec["taint"]]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.5"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.1.4"
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


@RECORDED
def test_the_real_kubelet_advertises_four_nvidia_com_gpu_on_one_card() -> None:
    status = load("node.json")["status"]
    slots = recording.program_objects()["node.json"]["slots"]

    assert slots == 4
    assert status["capacity"][GPU_RESOURCE] == status["allocatable"][GPU_RESOURCE] == str(slots)
    assert "nvidia-smi" in (FIXTURE / "machine.txt").read_text() or card_uuid()


@RECORDED
def test_four_smoke_pods_ran_at_once_and_saw_the_same_card() -> None:
    dump = load("dump.json")["items"]
    running = [
        pod
        for pod in dump
        if pod["kind"] == "Pod"
        and pod["metadata"]["namespace"] == "gpu-smoke-test"
        and pod["status"]["phase"] in ("Running", "Succeeded")
        and pod["spec"].get("nodeName")
    ]
    logs = {name: (FIXTURE / "pods" / f"{name}.log").read_text() for name in smoke_pods()}

    assert len(running) == 4
    for pod in running:
        log = logs[pod["metadata"]["name"]]
        assert set(UUID.findall(log)) == {card_uuid()}, pod["metadata"]["name"]
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {GPU_RESOURCE: "1"}


@RECORDED
def test_every_smoke_pod_ran_the_cuda_program_and_nvidia_smi_under_seccomp_as_a_non_root_user() -> None:
    pods = smoke_pods()

    assert len(pods) == recording.JOBS
    for name, pod in pods.items():
        log = (FIXTURE / "pods" / f"{name}.log").read_text()
        assert pod["status"]["phase"] == "Succeeded", name
        assert "Test PASSED" in log, name
        assert "uid=1000" in log, name
        assert "Seccomp:2" in log, name


@RECORDED
def test_the_fifth_pod_waited_unschedulable_for_nvidia_com_gpu() -> None:
    (pending,) = load("pending.json")["items"]
    (scheduled,) = [c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled"]

    assert pending["status"]["phase"] == "Pending"
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert f"Insufficient {GPU_RESOURCE}" in scheduled["message"]


@RECORDED
def test_the_device_plugin_ran_as_a_pod_under_the_programs_runtime_class_and_x4_profile() -> None:
    pod = json.loads((FIXTURE / "pods" / "nvidia-device-plugin.json").read_text())
    log = (FIXTURE / "logs" / "device-plugin.log").read_text()

    assert pod["spec"]["runtimeClassName"] == recording.rendered_toolkit_values()["runtimeClass"]
    assert pod["status"]["phase"] == "Running"
    assert "Starting nvidia-device-plugin" in log
    assert '"replicas": 4' in log or "replicas: 4" in log


@RECORDED
def test_the_device_plugins_cdi_spec_names_the_card_the_pods_saw() -> None:
    spec = json.loads((FIXTURE / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json").read_text())

    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    assert [device["name"] for device in spec["devices"]] == [card_uuid()]


@RECORDED
def test_nvidia_ctk_generated_a_cdi_spec_for_the_card_at_the_machines_driver_root() -> None:
    spec = yaml.safe_load((FIXTURE / "cdi" / "nvidia-ctk-generate.yaml").read_text())
    mounts = [m["containerPath"] for m in spec["containerEdits"].get("mounts", [])]

    assert spec["kind"] == "nvidia.com/gpu"
    assert {"0", card_uuid(), "all"} <= {device["name"] for device in spec["devices"]}
    assert any(path.endswith("/nvidia-smi") for path in mounts)


def rke2_configs() -> list[Path]:
    return sorted((FIXTURE / "containerd").glob("rke2-config-*.toml"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))


@RECORDED
def test_the_runtime_class_handler_comes_from_rke2s_config_not_from_the_toolkits_drop_in() -> None:
    """The program sets only CONTAINERD_SOCKET for the toolkit (operator_values._toolkit_env): the toolkit writes
    its runtimes under /etc/containerd, which RKE2's containerd never reads, and RKE2 registers the handler itself
    once the toolkit's binaries are in /usr/local/nvidia/toolkit."""
    first, last = (tomllib.loads(path.read_text()) for path in (rke2_configs()[0], rke2_configs()[-1]))
    runtimes = last["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    drop_in = tomllib.loads((FIXTURE / "containerd" / "toolkit-99-nvidia.toml").read_text())

    assert "nvidia" not in first["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    assert "nvidia" in json.dumps(drop_in)
    assert "imports" not in last


@RECORDED
def test_the_toolkit_installer_ignored_only_the_legacy_components_cdi_mode_never_runs() -> None:
    ignored = load("summary.json")["toolkitIgnoredErrors"]

    assert ignored
    for line in ignored:
        assert re.search(r"libnvidia-container(-go)?\.so\.1|nvidia-container-cli", line), line


@RECORDED
def test_node_check_passed_its_floors_on_the_node_it_ran_on() -> None:
    report = load("node-check.json")

    assert report["node"] == recording.program_objects()["node.json"]["name"]
    assert {floor["name"] for floor in report["floors"]} == {"pci", "link", "driver", "nvml", "health"}


@RECORDED
def test_the_chart_deploys_the_toolkit_and_device_plugin_versions_the_node_ran() -> None:
    root, _ = upstream_dir()
    values_file = None if root is None else root / "gpu-operator" / "v26.7.0" / "chart" / "values.yaml"
    if values_file is None or not values_file.exists():
        pytest.skip(NO_UPSTREAM)
    values = yaml.safe_load(values_file.read_text())

    assert values["toolkit"]["version"] == recording.TOOLKIT_VERSION
    assert values["devicePlugin"]["version"] == recording.DEVICE_PLUGIN_VERSION
    assert (
        f"nvidia-device-plugin: NVIDIA Device Plugin version {recording.DEVICE_PLUGIN_VERSION}"
        in (FIXTURE / "machine.txt").read_text()
    )


def test_the_run_builds_the_same_image_from_the_same_folders_and_another_from_another(tmp_path: Path) -> None:
    """The run's images are built on the machine (e2e/gpunode/oci_image.py): the same files give the same image
    digest whatever their times, so the recorded digest names what ran."""
    script = ROOT_DIR / "e2e" / "gpunode" / "oci_image.py"
    layer = tmp_path / "layer"
    (layer / "bin").mkdir(parents=True)
    (layer / "bin" / "smoke").write_text("echo hello\n")

    def index(name: str) -> str:
        out = tmp_path / f"{name}.tar"
        subprocess.run(
            [sys.executable, str(script), str(out), "example.local/smoke:1", str(layer)],
            check=True,
            capture_output=True,
        )
        with tarfile.open(out) as tar:
            member = tar.extractfile("index.json")
            assert member is not None
            digest: str = json.loads(member.read())["manifests"][0]["digest"]
            return digest

    first = index("first")
    os.utime(layer / "bin" / "smoke", (1, 1))
    again = index("again")
    (layer / "bin" / "smoke").write_text("echo other\n")

    assert first == again != index("other")


# --- The run of 2026-12-05 on the lent H100 (tests/fixtures/gpu_node_blocked/): what it showed before it stopped ---
BLOCKED = recording.FIXTURE.parent / "gpu_node_blocked"


def blocked(name: str) -> Any:
    return json.loads((BLOCKED / name).read_text())


def test_the_blocked_run_was_of_the_toolkit_values_and_x4_document_the_program_renders_today() -> None:
    assert recording.stale_recording(blocked("digests.json")) == []


def test_on_the_lent_machine_a_real_kubelet_registered_the_node_with_the_programs_labels_and_taint() -> None:
    node = blocked("node.json")
    spec = recording.program_objects()["node.json"]
    objects = [node, *blocked("pending.json")["items"], *blocked("dump.json")["items"]]

    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert spec["labels"].items() <= node["metadata"]["labels"].items()
    assert [f"{t['key']}={t['value']}:{t['effect']}" for t in node["spec"]["taints"]] == [spec["taint"]]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.5"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.1.4"
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_the_blocked_run_stopped_at_the_toolkit_which_could_not_write_its_install_dir_on_this_machine() -> None:
    """The machine's driver files are a read-only /usr/local/nvidia, the chart's toolkit.installDir: the installer
    wrote its drop-in and CDI spec but no runtime binaries, so RKE2's config gained no `nvidia` handler and the
    device plugin's pod could not start ('no runtime for "nvidia" is configured', the trap knowledge/rke2.py names)."""
    toolkit = (BLOCKED / "logs" / "toolkit.log").read_text()
    containerd = (BLOCKED / "logs" / "containerd.log").read_text()
    last_config = tomllib.loads((BLOCKED / "containerd" / "rke2-config-3.toml").read_text())
    drop_in = tomllib.loads((BLOCKED / "containerd" / "toolkit-99-nvidia.toml").read_text())

    assert "mkdir /usr/local/nvidia/toolkit: read-only file system" in toolkit
    assert "Sending SIGHUP signal to containerd" in toolkit
    assert set(last_config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]) == {"runc"}
    assert "nvidia" in drop_in["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert 'no runtime for \\"nvidia\\" is configured' in containerd


def test_in_the_blocked_run_every_smoke_pod_waited_for_nvidia_com_gpu_with_no_plugin_registered() -> None:
    pending = blocked("pending.json")["items"]
    node = blocked("node.json")

    assert GPU_RESOURCE not in node["status"]["capacity"]
    assert len(pending) == recording.JOBS
    for pod in pending:
        (scheduled,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
        assert f"Insufficient {GPU_RESOURCE}" in scheduled["message"]


def test_the_blocked_runs_cdi_specs_name_the_lent_card() -> None:
    uuid = set(UUID.findall((BLOCKED / "machine.txt").read_text()))
    generated = yaml.safe_load((BLOCKED / "cdi" / "nvidia-ctk-generate.yaml").read_text())
    management = yaml.safe_load((BLOCKED / "cdi" / "management.nvidia.com-gpu.yaml").read_text())

    assert len(uuid) == 1
    assert uuid <= {device["name"] for device in generated["devices"]}
    assert generated["kind"] == "nvidia.com/gpu"
    assert management["kind"] == "management.nvidia.com/gpu"
