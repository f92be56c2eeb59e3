"""The operator's floors on one node: driver, container toolkit, device plugin and DCGM exporter.

Each is the operand DaemonSet's pod for the node (found by the `app` label the v26.3.2 assets set, see
knowledge/gpu_operator.py), which must be Running and Ready. A crash loop or a failed init container is broken;
an init container still running means the floor below is not ready yet.
"""

from __future__ import annotations

from day2 import objects as o
from day2.doctor import traps as t
from day2.doctor.floors_types import Check, Fix, NodeContext
from day2.doctor.operands import PodHealth, assess, current, driver_version, operand_pods
from knowledge.gpu_operator import (
    DCGM_EXPORTER_APP,
    DCGM_EXPORTER_CONTAINER,
    DEVICE_PLUGIN_APP,
    DEVICE_PLUGIN_CONTAINER,
    DRIVER_APP,
    DRIVER_CONTAINER,
    DRIVER_MANAGER_INIT_CONTAINER,
    DRIVER_UPGRADE_FAILED,
    DRIVER_UPGRADE_STATE_LABEL,
    NFD_NVIDIA_PCI_LABEL,
    OPERATOR_VALIDATOR_APP,
    OPERATOR_VALIDATOR_CONTAINER,
    TOOLKIT_APP,
    TOOLKIT_CONTAINER,
)

UNTOLERATED = "untolerated taint"


def _health(ctx: NodeContext, app: str, container: str) -> tuple[PodHealth, o.JsonObject | None]:
    pod = current(operand_pods(ctx.snapshot, ctx.ns, app, ctx.name))
    return assess(pod, ctx.ns, app, container), (dict(pod) if pod is not None else None)


def _broken(health: PodHealth, *traps: int, extra: str = "") -> Check:
    return Check(False, health.detail + extra, Fix.of(health.command, *traps))


def _untolerated(health: PodHealth) -> bool:
    return health.problem == "unschedulable" and UNTOLERATED in health.scheduler_message


def driver_floor(ctx: NodeContext) -> Check:
    health, pod = _health(ctx, DRIVER_APP, DRIVER_CONTAINER)
    node_labels = o.labels(ctx.node or {})
    if health.problem == "missing":
        if node_labels.get(NFD_NVIDIA_PCI_LABEL) != "true":
            extra = f"; the node has no {NFD_NVIDIA_PCI_LABEL}=true label yet, so no operand is scheduled here"
            return _broken(health, t.NFD_FIRST_SCAN, extra=extra)
        return _broken(health)
    if health.problem == "crash":
        # The driver container builds and loads the module: its log says which of these it is.
        build_traps = (t.DISTRO_NOT_SUPPORTED, t.UNKNOWN_SYMBOL, t.MISSING_HEADERS)
        return _broken(health, t.DRIVER_OOM) if health.oom else _broken(health, *build_traps)
    if _untolerated(health):
        return _broken(health, t.INSUFFICIENT_GPU)
    if health.problem == "not-ready":
        return _broken(health, extra=" (the first build of the kernel module takes minutes: pull, headers, compile)")
    if not health.ok:
        return _broken(health)
    upgrade = node_labels.get(DRIVER_UPGRADE_STATE_LABEL)
    if upgrade == DRIVER_UPGRADE_FAILED:
        command = f"kubectl -n {ctx.ns} logs {health.pod} -c {DRIVER_MANAGER_INIT_CONTAINER}"
        return Check(False, f"{health.detail}, but {DRIVER_UPGRADE_STATE_LABEL}={upgrade}", Fix.of(command))
    version = driver_version(pod, DRIVER_CONTAINER) if pod else None
    detail = f"{health.detail}, driver {version or 'unknown'}"
    pinned = ctx.facts.driver_version
    if pinned and version and version != pinned:
        detail += f" (the stack pins {pinned}: the driver pod has not been replaced yet)"
    return Check(True, detail)


def toolkit_floor(ctx: NodeContext) -> Check:
    health, _ = _health(ctx, TOOLKIT_APP, TOOLKIT_CONTAINER)
    if health.problem == "crash":
        return _broken(health, t.NO_RUNTIME, t.KUBEARMOR)
    return Check(True, health.detail) if health.ok else _broken(health)


# Each validator init container, and the traps that make it fail (docs/traps.md).
VALIDATION_TRAPS: dict[str, tuple[int, ...]] = {
    "driver-validation": (t.UNKNOWN_SYMBOL, t.MISSING_HEADERS),
    "toolkit-validation": (t.NO_RUNTIME, t.NVML_MISMATCH, t.CDI_UNREAD, t.MISSING_RUNTIME_CLASS),
    "cuda-validation": (t.NVML_MISMATCH, t.CDI_UNREAD, t.MISSING_RUNTIME_CLASS),
    "plugin-validation": (t.INSUFFICIENT_GPU,),
}


def operator_validator_floor(ctx: NodeContext) -> Check:
    """The proof that the runtime chain works: a Ready toolkit pod proves nothing (it has no probe), and every
    floor above waits for the file the validator's toolkit-validation writes."""
    health, _ = _health(ctx, OPERATOR_VALIDATOR_APP, OPERATOR_VALIDATOR_CONTAINER)
    if health.ok:
        return Check(True, health.detail)
    if health.problem in ("init-crash", "init-waiting"):
        failing = next((name for name in VALIDATION_TRAPS if f" {name} " in f"{health.detail} "), None)
        if failing is not None:
            return _broken(health, *VALIDATION_TRAPS[failing])
    if _untolerated(health):
        return _broken(health, t.INSUFFICIENT_GPU)
    return _broken(health)


def device_plugin_floor(ctx: NodeContext) -> Check:
    health, _ = _health(ctx, DEVICE_PLUGIN_APP, DEVICE_PLUGIN_CONTAINER)
    if _untolerated(health):
        return _broken(health, t.INSUFFICIENT_GPU)
    if health.problem == "missing" and any(
        taint.get("key") == ctx.facts.marking.taint_key for taint in o.taints(ctx.node or {})
    ):
        # The DaemonSet controller creates no pod for a node whose taint it does not tolerate.
        extra = f"; a device plugin without the {ctx.facts.marking.taint_key} toleration is never placed here"
        return _broken(health, t.INSUFFICIENT_GPU, extra=extra)
    return Check(True, health.detail) if health.ok else _broken(health)


def dcgm_exporter_floor(ctx: NodeContext) -> Check:
    health, _ = _health(ctx, DCGM_EXPORTER_APP, DCGM_EXPORTER_CONTAINER)
    if health.problem == "crash" and health.oom:
        return _broken(health, t.DCGM_OOM)
    return Check(True, health.detail) if health.ok else _broken(health)
