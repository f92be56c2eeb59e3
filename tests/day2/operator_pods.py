"""The GPU Operator's operand pods on one node, shaped as the v26.3.2 DaemonSets create them.

Labels, init containers and containers are those of the operator's assets/ (see knowledge/gpu_operator.py):
driver (k8s-driver-manager; nvidia-driver-ctr), toolkit (driver-validation; nvidia-container-toolkit-ctr),
device plugin (toolkit-validation, config-manager-init; nvidia-device-plugin, config-manager), DCGM exporter
(toolkit-validation; nvidia-dcgm-exporter), GPU feature discovery and the operator validator.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from tests.day2.k8s_objects import (
    Obj,
    completed,
    container,
    crash_looping,
    pod,
    pod_conditions,
    running,
    suffix,
    waiting,
)

OPERATOR_NS = "gpu-operator"
DRIVER_IMAGE = "nvcr.io/nvidia/driver:570.211.01-ubuntu24.04"
VALIDATOR_IMAGE = "nvcr.io/nvidia/gpu-operator:v26.3.2"
IMAGES = {
    "k8s-driver-manager": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.11.0",
    "nvidia-driver-ctr": DRIVER_IMAGE,
    "nvidia-container-toolkit-ctr": "nvcr.io/nvidia/k8s/container-toolkit:v1.19.1",
    "nvidia-device-plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.19.2",
    "config-manager": "nvcr.io/nvidia/k8s-device-plugin:v0.19.2",
    "config-manager-init": "nvcr.io/nvidia/k8s-device-plugin:v0.19.2",
    "nvidia-dcgm-exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",
    "gpu-feature-discovery": "nvcr.io/nvidia/k8s-device-plugin:v0.19.2",
    "nvidia-operator-validator": VALIDATOR_IMAGE,
}


@dataclass(frozen=True)
class Operand:
    app: str
    init: tuple[str, ...]
    main: tuple[str, ...]
    extra_labels: tuple[tuple[str, str], ...] = ()


DRIVER = Operand(
    "nvidia-driver-daemonset",
    ("k8s-driver-manager",),
    ("nvidia-driver-ctr",),
    (("app.kubernetes.io/component", "nvidia-driver"), ("nvidia.com/precompiled", "false")),
)
TOOLKIT = Operand("nvidia-container-toolkit-daemonset", ("driver-validation",), ("nvidia-container-toolkit-ctr",))
DEVICE_PLUGIN = Operand(
    "nvidia-device-plugin-daemonset",
    ("toolkit-validation", "config-manager-init"),
    ("nvidia-device-plugin", "config-manager"),
)
DCGM_EXPORTER = Operand("nvidia-dcgm-exporter", ("toolkit-validation",), ("nvidia-dcgm-exporter",))
GFD = Operand(
    "gpu-feature-discovery", ("toolkit-validation", "config-manager-init"), ("gpu-feature-discovery", "config-manager")
)
VALIDATOR = Operand(
    "nvidia-operator-validator",
    ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
    ("nvidia-operator-validator",),
)
OPERANDS = (DRIVER, TOOLKIT, DEVICE_PLUGIN, DCGM_EXPORTER, GFD, VALIDATOR)

State = Literal["ready", "oom-crashloop", "crashloop", "stuck-init", "init-crashloop", "unschedulable", "not-ready"]


def _image(name: str) -> str:
    return IMAGES.get(name, VALIDATOR_IMAGE)


def pod_name(operand: Operand, node: str) -> str:
    return f"{operand.app}-{suffix(operand.app, node)}"


def operand_pod(
    operand: Operand,
    node: str,
    state: State = "ready",
    *,
    age: timedelta = timedelta(days=20),
    stuck_at: int = 0,
    message: str = "",
    tolerate_gpu: bool = True,
) -> Obj:
    """One operand pod for `node`. stuck_at: index of the init container a stuck pod waits in."""
    name = pod_name(operand, node)
    labels = {
        "app": operand.app,
        "controller-revision-hash": suffix("rev", operand.app, length=10).replace("z", "5"),
        "pod-template-generation": "1",
        **dict(operand.extra_labels),
    }
    inits = [container(c, _image(c)) for c in operand.init]
    mains = [container(c, _image(c)) for c in operand.main]
    # The chart's default toleration of the GPU taint (a trimmed values file may drop it: trap 11).
    gpu_toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if tolerate_gpu else []

    def build(statuses: list[Obj], phase: str, conditions: list[Obj], init_statuses: list[Obj] | None = None) -> Obj:
        return pod(
            name,
            OPERATOR_NS,
            containers=mains,
            init_containers=inits,
            labels=labels,
            owner=("apps/v1", "DaemonSet", operand.app),
            age=age,
            daemonset_node=node,
            node_name=None if phase == "Pending" and init_statuses is None else node,
            tolerations=gpu_toleration,
            statuses=statuses,
            phase=phase,
            conditions=conditions,
            init_statuses=init_statuses,
        )

    if state == "unschedulable":
        return build([], "Pending", pod_conditions(scheduled=None, message=message))
    done_inits = [completed(c, _image(c), age) for c in operand.init]
    if state in ("stuck-init", "init-crashloop"):
        init_statuses = done_inits[:stuck_at]
        stuck = operand.init[stuck_at]
        if state == "stuck-init":
            init_statuses.append(running(stuck, _image(stuck), age, ready=False))
        else:
            init_statuses.append(crash_looping(stuck, _image(stuck), name, exit_code=1, reason="Error", restarts=9))
        init_statuses += [waiting(c, _image(c), "PodInitializing") for c in operand.init[stuck_at + 1 :]]
        statuses = [waiting(c, _image(c), "PodInitializing") for c in operand.main]
        return build(statuses, "Pending", pod_conditions(scheduled=age, initialized=False, ready=False), init_statuses)
    first, *rest = operand.main
    if state == "oom-crashloop":
        head = crash_looping(first, _image(first), name, exit_code=137, reason="OOMKilled", restarts=14)
    elif state == "crashloop":
        head = crash_looping(first, _image(first), name, exit_code=1, reason="Error", restarts=7)
    else:
        head = running(first, _image(first), age, ready=state == "ready")
    statuses = [head, *(running(c, _image(c), age) for c in rest)]
    return build(statuses, "Running", pod_conditions(scheduled=age, ready=state == "ready"), done_inits)


def healthy_operands(node: str) -> list[Obj]:
    return [operand_pod(operand, node) for operand in OPERANDS]


def operator_deployment_pod() -> Obj:
    """The operator itself (a Deployment on the control plane), which doctor must not mistake for an operand."""
    image = VALIDATOR_IMAGE
    return pod(
        f"gpu-operator-7d9c8b6f4d-{suffix('gpu-operator')}",
        OPERATOR_NS,
        containers=[
            container(
                "gpu-operator",
                image,
                limits={"cpu": "500m", "memory": "350Mi"},
                requests={"cpu": "200m", "memory": "100Mi"},
            )
        ],
        statuses=[running("gpu-operator", image, timedelta(days=20))],
        phase="Running",
        conditions=pod_conditions(scheduled=timedelta(days=20)),
        age=timedelta(days=20),
        node_name="rke2-server-1",
        labels={
            "app": "gpu-operator",
            "app.kubernetes.io/component": "gpu-operator",
            "pod-template-hash": "7d9c8b6f4d",
        },
        owner=("apps/v1", "ReplicaSet", "gpu-operator-7d9c8b6f4d"),
    )
