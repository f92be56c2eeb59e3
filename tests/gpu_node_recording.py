"""A real GPU node running the program's objects: what the run gets, and what it printed.

One call of the device tool (docs/verification.md, "On a real GPU: a real kubelet runs the program's pods") starts a
whole node on the lent GPU machine, every program built here from its pin (e2e/build-node-tools.sh): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet, containerd at the minor the pinned RKE2 release
bundles with runc (seccomp) and the CNI bridge, the NVIDIA Container Toolkit's installer with the environment the
program renders for it, and the device plugin as a pod with the program's RuntimeClass. On it go the program's own
objects, rendered here from a shipped stack (`examples/day2/Pulumi.h200-lab.yaml`, domain dc2: the lent card,
profile `a1000-x4`): the time-slicing ConfigMap, the toolkit's environment, the node's labels and taint, five
copies of the domain's CUDA smoke Job (its image swapped for one built here from Debian packages), and the
unattended repair's node-check Job for the node with its namespace and code (its image swapped for one built from
Debian's Python 3.11). Four smoke Jobs each get one of the card's four slots; the fifth waits.

    python -m tests.gpu_node_recording objects DIR          the program's objects for the run (DIR/objects/)
    python -m tests.gpu_node_recording import RAW.tar.gz     tests/fixtures/gpu_node/ from what the run printed

The fixture keeps a digest of what the program rendered for the run (the toolkit/CDI values, the x4 document);
`tests/gpu_platform/test_gpu_node_run.py` fails when today's program renders another, naming what to re-record.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Final

from components.gpu_failure_domain.node_metadata import node_labels
from components.gpu_failure_domain.smoke_test import build_smoke_job, smoke_device, validated_stack
from components.gpu_platform.release_values import release_values
from components.gpu_platform.time_slicing import build_time_slicing_configmap, render_profile
from components.shared.node_marking import GpuNodeMarking
from components.unattended.node_check_job import (
    node_check_code,
    node_check_flags,
    node_check_job,
    node_check_namespace,
    node_check_zip,
)
from config.repair import UnattendedConfig
from config.stack import StackConfig
from knowledge.gpu_operator import GPU_RESOURCE
from knowledge.rke2 import RKE2_CONTAINERD_SOCKET
from offline.runner import ROOT_DIR
from tests.plugin_recording import stack_config

FIXTURE: Final = Path(__file__).resolve().parent / "fixtures" / "gpu_node"
STACK_DIR: Final = ROOT_DIR / "examples" / "day2"
STACK: Final = "h200-lab"
DOMAIN: Final = "dc2"
JOBS: Final = 5
# What the chart v26.7.0 deploys (values.yaml toolkit.version, devicePlugin.version), checked against the upstream
# chart by the test when the reference data is there.
TOOLKIT_VERSION: Final = "v1.20.0"
DEVICE_PLUGIN_VERSION: Final = "v0.20.0"
# The local images the run builds from Debian packages (e2e/gpunode/run.sh), never pulled.
SMOKE_IMAGE: Final = "gpu-pool.local/cuda-smoke:debian12"
PLUGIN_IMAGE: Final = f"gpu-pool.local/k8s-device-plugin:{DEVICE_PLUGIN_VERSION}"
# The node-check Job's image: Debian 12's python3.11-minimal and standard library on the base (prepare-carry.sh).
PYTHON_IMAGE: Final = "gpu-pool.local/python:3.11-debian12"
NODE_CHECK_JOB: Final = "node-check-gpunode"
# Files of the run the fixture keeps, by their path in the run's tarball.
KEPT: Final = (
    "summary.json",
    "summary.txt",
    "machine.txt",
    "digests.json",
    "dump.json",
    "dump-final.json",
    "node.json",
    "pending.json",
    "node-check.json",
    "nvml.json",
    "logs/toolkit.log",
    "logs/containerd.log",
    "logs/device-plugin.log",
    "logs/nvcc.log",
    "logs/cdi-generate.log",
    "node-check-job-report.json",
    "toolkit-path.txt",
)
# Folders of the run the fixture keeps whole: each pod's log and object, the CDI specs on the node (the toolkit's,
# the device plugin's, `nvidia-ctk cdi generate`'s), and containerd's configs (RKE2's at each start, the toolkit's).
KEPT_FOLDERS: Final = ("pods", "cdi", "containerd")


def _stack() -> StackConfig:
    return stack_config(STACK, STACK_DIR)


def _domain(stack: StackConfig) -> Any:
    (domain,) = (d for d in stack.failure_domains if d.name == DOMAIN)
    return domain


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def rendered_toolkit_values() -> dict[str, Any]:
    """What the program renders that decides how the node runs containers: the toolkit's environment, CDI, the
    operands' RuntimeClass, the versions the chart deploys."""
    stack = _stack()
    values = release_values(stack.gpu_operator, stack.kyverno, stack.monitoring)
    return {
        "toolkit": values["toolkit"],
        "cdi": values["cdi"],
        "runtimeClass": values["operator"]["runtimeClass"],
        "toolkitVersion": TOOLKIT_VERSION,
        "devicePluginVersion": DEVICE_PLUGIN_VERSION,
    }


def rendered_profile() -> str:
    """The time-slicing document of the domain's profile (the x4 one), as the device plugin reads it."""
    stack = _stack()
    return render_profile(stack.sharing_profiles[_domain(stack).sharing])


def digests() -> dict[str, str]:
    """sha256 of each rendered input of the run: a recording is of today's program only while these match."""
    return {
        "toolkit-cdi-values": hashlib.sha256(_canonical(rendered_toolkit_values()).encode()).hexdigest(),
        "x4-time-slicing-document": hashlib.sha256(rendered_profile().encode()).hexdigest(),
    }


RERECORD: Final = (
    "record the GPU node run again (docs/verification.md, 'On a real GPU: a real kubelet runs the program's pods': "
    "python -m tests.gpu_node_recording objects, the device tool's run, python -m tests.gpu_node_recording import)"
)


def stale_recording(recorded: dict[str, str]) -> list[str]:
    """One message per rendered input that is no longer what the node ran, naming it and how to record it again."""
    today = digests()
    return [
        f"{name}: the program renders {today.get(name, 'nothing')[:12]}…, "
        f"the node ran {recorded.get(name, 'nothing')[:12]}…; {RERECORD}"
        for name in sorted(set(today) | set(recorded))
        if today.get(name) != recorded.get(name)
    ]


def _smoke_jobs(stack: StackConfig) -> list[dict[str, Any]]:
    domain = _domain(stack)
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    smoke = stack.smoke_test.model_copy(update={"image": SMOKE_IMAGE})
    validated = validated_stack(
        chart_version=stack.gpu_operator.chart_version,
        driver_version=stack.gpu_operator.driver_version,
        node=domain.hostname,
        device=smoke_device(domain),
        image=smoke.image,
        kernel=domain.kernel,
    )
    # No Kyverno on the node: the program's own no-policy path, where the Job carries the GPU toleration itself.
    job = build_smoke_job(domain.name, smoke, validated, toleration=marking.toleration)
    jobs = []
    for n in range(1, JOBS + 1):
        copy_ = copy.deepcopy(job)
        copy_["metadata"]["name"] = f"{job['metadata']['name']}-{n}"
        # A local image is never pulled (the node cannot reach a registry).
        copy_["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
        jobs.append(copy_)
    return jobs


def _node_check_objects(stack: StackConfig) -> dict[str, Any]:
    """The unattended repair's node-check Job for the domain's node, exactly as the watcher creates it
    (components/unattended/node_check_job.py, with the stack's flags for the domain), with its namespace and code,
    the image swapped for the run's local Python image. The watcher's defaults stand for the stack's own
    `repair.unattended` (off in this stack): the namespace, the image's role and the Job's spec do not depend on it."""
    domain = _domain(stack)
    cfg = UnattendedConfig(image=PYTHON_IMAGE)
    job = node_check_job(cfg, domain.hostname, node_check_flags(stack, domain), NODE_CHECK_JOB)
    # A local image is never pulled (the node cannot reach a registry).
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    return {
        "node-check-namespace.json": node_check_namespace(cfg),
        "node-check-code.json": node_check_code(cfg, node_check_zip()),
        "node-check-job.json": job,
    }


def toolkit_container(values: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The toolkit container as the GPU Operator v26.7.0 runs it on a containerd node: the DaemonSet's own env
    (assets/state-container-toolkit/0500_daemonset.yaml), then TransformToolkit (controllers/object_controls.go:
    transformToolkitCtrForCDI for cdi.enabled, toolkit.env set as given, transformForRuntime and
    transformRuntimeConfigAndSocketMounts for containerd), which turns each host path the env names into a mount and
    the container's own path. The installer (`nvidia-toolkit`) then reads only this environment and these mounts."""
    env = {
        "ROOT": "/usr/local/nvidia",
        "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND": "management.nvidia.com/gpu",
        "NVIDIA_VISIBLE_DEVICES": "void",
        "TOOLKIT_PID_FILE": "/run/nvidia/toolkit/toolkit.pid",
        "NRI_NAMESPACE": namespace,
    }
    if values["cdi"]["enabled"]:
        env |= {
            "CDI_ENABLED": "true",
            "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
            "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi",
            "CRIO_CONFIG_MODE": "config",
        }
    for item in values["toolkit"].get("env", []):
        env[item["name"]] = item["value"]
    env["RUNTIME"] = "containerd"
    env["CONTAINERD_RUNTIME_CLASS"] = values["runtimeClass"]
    config = env.get("CONTAINERD_CONFIG") or env.get("RUNTIME_CONFIG") or "/etc/containerd/config.toml"
    drop_in = env.get("RUNTIME_DROP_IN_CONFIG") or "/etc/containerd/conf.d/99-nvidia.toml"
    socket = env.get("CONTAINERD_SOCKET") or "/run/containerd/containerd.sock"
    config_dir, config_name = config.rsplit("/", 1)
    drop_in_dir, drop_in_name = drop_in.rsplit("/", 1)
    socket_dir, socket_name = socket.rsplit("/", 1)
    env |= {
        "RUNTIME_CONFIG": f"/runtime/config-dir/{config_name}",
        "CONTAINERD_CONFIG": f"/runtime/config-dir/{config_name}",
        "RUNTIME_DROP_IN_CONFIG": f"/runtime/config-dir.d/{drop_in_name}",
        "RUNTIME_DROP_IN_CONFIG_HOST_PATH": drop_in,
        "RUNTIME_SOCKET": f"/runtime/sock-dir/{socket_name}",
        "CONTAINERD_SOCKET": f"/runtime/sock-dir/{socket_name}",
    }
    mounts = [
        {"hostPath": "/run/nvidia/toolkit", "mountPath": "/run/nvidia/toolkit", "readOnly": False},
        {"hostPath": "/run/nvidia/validations", "mountPath": "/run/nvidia/validations", "readOnly": False},
        {"hostPath": "/usr/local/nvidia", "mountPath": "/usr/local/nvidia", "readOnly": False},
        {"hostPath": "/run/nvidia/driver", "mountPath": "/driver-root", "readOnly": False},
        {"hostPath": "/var/run/cdi", "mountPath": "/var/run/cdi", "readOnly": False},
        {"hostPath": config_dir, "mountPath": "/runtime/config-dir", "readOnly": False},
        {"hostPath": drop_in_dir, "mountPath": "/runtime/config-dir.d", "readOnly": False},
        {"hostPath": socket_dir, "mountPath": "/runtime/sock-dir", "readOnly": False},
        {"hostPath": "/", "mountPath": "/host", "readOnly": True},
    ]
    return {"env": env, "mounts": mounts}


def _device_plugin_pod(stack: StackConfig, profile_key: str, runtime_class: str) -> dict[str, Any]:
    """The GPU Operator v26.7.0 device-plugin DaemonSet's pod (assets/state-device-plugin/0500_daemonset.yaml,
    after TransformDevicePlugin with cdi.enabled), on this node, with the program's RuntimeClass. Two changes, both
    because the node has no Service network (no kube-proxy): config-manager, which reads the node's profile label
    through the API's Service address, is left out, and the profile's ConfigMap key is mounted where it would write
    it; and the operator's tolerations are the chart's GPU one the program keeps."""
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    env = {
        "PASS_DEVICE_SPECS": "true",
        "FAIL_ON_INIT_ERROR": "true",
        "DEVICE_ID_STRATEGY": "uuid",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "all",
        "MPS_ROOT": "/run/nvidia/mps",
        "MIG_STRATEGY": "single",
        "NVIDIA_MIG_MONITOR_DEVICES": "all",
        "CDI_ENABLED": "true",
        "DEVICE_LIST_STRATEGY": "cdi-annotations,cdi-cri",
        "CDI_ANNOTATION_PREFIX": "cdi.k8s.io/",
        "NVIDIA_CDI_HOOK_PATH": "/usr/local/nvidia/toolkit/nvidia-cdi-hook",
        "CONFIG_FILE": "/config/config.yaml",
    }

    def host(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
        source: dict[str, Any] = {"path": path}
        if kind:
            source["type"] = kind
        return {"name": name, "hostPath": source}

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nvidia-device-plugin",
            "namespace": stack.gpu_operator.namespace,
            "labels": {"app": "nvidia-device-plugin-daemonset"},
        },
        "spec": {
            "nodeName": _domain(stack).hostname,
            "runtimeClassName": runtime_class,
            "priorityClassName": "system-node-critical",
            "tolerations": [marking.toleration],
            "containers": [
                {
                    "name": "nvidia-device-plugin",
                    "image": PLUGIN_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c"],
                    "args": ["/bin/entrypoint.sh"],
                    "securityContext": {"privileged": True},
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "volumeMounts": [
                        {"name": "entrypoint", "mountPath": "/bin/entrypoint.sh", "subPath": "entrypoint.sh"},
                        {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                        {"name": "run-nvidia-validations", "mountPath": "/run/nvidia/validations"},
                        {
                            "name": "driver-install-dir",
                            "mountPath": "/driver-root",
                            "mountPropagation": "HostToContainer",
                        },
                        {
                            "name": "host-root",
                            "mountPath": "/host",
                            "readOnly": True,
                            "mountPropagation": "HostToContainer",
                        },
                        {"name": "cdi-root", "mountPath": "/var/run/cdi"},
                        {"name": "config", "mountPath": "/config"},
                    ],
                }
            ],
            "volumes": [
                {"name": "entrypoint", "configMap": {"name": "nvidia-device-plugin-entrypoint", "defaultMode": 448}},
                host("device-plugin", "/var/lib/kubelet/device-plugins"),
                host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
                host("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
                host("host-root", "/"),
                host("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
                {
                    "name": "config",
                    "configMap": {
                        "name": "time-slicing-config",
                        "items": [{"key": profile_key, "path": "config.yaml"}],
                    },
                },
            ],
        },
    }


def program_objects() -> dict[str, Any]:
    """Every object and value the run applies, by file name."""
    stack = _stack()
    domain = _domain(stack)
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    values = rendered_toolkit_values()
    namespace = stack.gpu_operator.namespace
    runtime_class = values["runtimeClass"]
    configmap = build_time_slicing_configmap(stack.sharing_profiles, namespace)
    return {
        "node.json": {
            "name": domain.hostname,
            "labels": node_labels(domain, marking),
            "taint": marking.taint,
            "slots": stack.slots(domain),
            "profile": domain.sharing,
            # What node-check is told to expect of the domain's card (its floors name any difference).
            "expect": {
                "id": domain.cards[0].vendor_device_id,
                "subsystem": domain.cards[0].subsystem_id,
                "driver": stack.gpu_operator.driver_version,
            },
        },
        "toolkit-container.json": toolkit_container(values, namespace),
        "toolkit-env.json": values["toolkit"]["env"],
        "values.json": values,
        "profile.yaml": rendered_profile(),
        "namespaces.json": {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                for name in (namespace, stack.smoke_test.namespace)
            ],
        },
        "time-slicing-config.json": configmap,
        # RKE2's rke2-runtimeclasses chart creates these (knowledge/rke2.py); the operands use the first.
        "runtimeclass.json": {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": runtime_class},
            "handler": runtime_class,
        },
        "device-plugin-pod.json": _device_plugin_pod(stack, domain.sharing, runtime_class),
        "smoke-jobs.json": {"apiVersion": "v1", "kind": "List", "items": _smoke_jobs(stack)},
        **_node_check_objects(stack),
        "digests.json": digests(),
        "containerd-socket.txt": RKE2_CONTAINERD_SOCKET + "\n",
        "resource.txt": GPU_RESOURCE + "\n",
    }


def write_objects(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in program_objects().items():
        text = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True) + "\n"
        (directory / name).write_text(text)


def import_run(raw: Path, target: Path = FIXTURE) -> None:
    """Keep what the run printed (the files of KEPT, and each pod's log and status) under `target`."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(raw) as tar:
            tar.extractall(tmp, filter="data")
        run = Path(tmp)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name in KEPT:
            source = run / name
            if source.exists():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target / name)
        for folder in KEPT_FOLDERS:
            for source in sorted((run / folder).glob("*")):
                if source.is_file():
                    (target / folder).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, target / folder / source.name)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu_node_recording")
    commands = parser.add_subparsers(dest="command", required=True)
    objects = commands.add_parser("objects", help="the program's objects for the run")
    objects.add_argument("directory", type=Path)
    imported = commands.add_parser("import", help="the fixture from the run's tarball")
    imported.add_argument("raw", type=Path)
    imported.add_argument("--target", type=Path, default=FIXTURE)
    args = parser.parse_args()
    if args.command == "objects":
        write_objects(args.directory)
    else:
        import_run(args.raw, args.target)


if __name__ == "__main__":
    main()
