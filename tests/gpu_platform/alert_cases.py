"""Series that must fire each GPU alert, and near misses that must not, for `promtool test rules`.

Label sets are those the exporters really emit: dcgm-exporter (GPU identity `Hostname`, `gpu`, `UUID`,
`device`, `modelName`, `pci_bus_id`, pod labels renamed `exported_*` behind the ServiceMonitor) and
kube-state-metrics (`node`, `resource="nvidia_com_gpu"`, `unit`; pod series by `namespace`, `pod`).
Expected annotations are the rule's own templates with the alert's labels and value put in, so a template
that names a label the alert does not carry fails here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knowledge.metric_names import DCGM_DRIVER_VERSION, contract_of

DC1, DC2, DC3 = "rke2-worker-dc1-gpu-a", "rke2-worker-dc2-gpu-a", "rke2-worker-dc3-gpu-a"
UUIDS = {
    DC1: "GPU-5b2c3d1e-7a41-4e1b-9c55-0d3f6a7e8b21",
    DC2: "GPU-8e1f0a2b-3c4d-4e5f-a6b7-c8d9e0f1a2b3",
    DC3: "GPU-0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b",
}
OTHER = 'job="kube-state-metrics", instance="10.42.0.9:8080"'


def dcgm(metric: str, node: str, *, pod: str = "", namespace: str = "", extra: str = "") -> str:
    """A dcgm-exporter series as Prometheus stores it behind the operator's ServiceMonitor."""
    held = f', exported_pod="{pod}", exported_namespace="{namespace}", exported_container="main"' if pod else ""
    return (
        f'{metric}{{Hostname="{node}", UUID="{UUIDS[node]}", gpu="0", device="nvidia0", '
        f'modelName="NVIDIA RTX A1000", pci_bus_id="00000000:01:00.0", DCGM_FI_DRIVER_VERSION="570.211.01", '
        f'instance="10.42.1.7:9400", job="nvidia-dcgm-exporter", namespace="gpu-operator", '
        f'pod="nvidia-dcgm-exporter-bqh48", service="nvidia-dcgm-exporter", container="nvidia-dcgm-exporter"'
        f"{held}{extra}}}"
    )


def newer_names(series: str, values: str) -> tuple[str, str]:
    """A series as dcgm-exporter 4.9+/4.10 with gpu-pool's counters file for it writes it: the field under its newer
    name (knowledge/metric_names.py), the driver-version label too, the node in `hostname` (dcgm-exporter#655).
    Other series are unchanged. Only same-field renames occur in the cases: their values need no conversion."""
    name = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", series)
    metric = contract_of(name.group(0)) if name else None
    if metric is None:
        return series, values
    assert metric.current_scale == 1.0, f"{metric.legacy}: a unit change needs its values converted"
    renamed = metric.current + series[len(metric.legacy) :]
    renamed = renamed.replace(f'{DCGM_DRIVER_VERSION.legacy}="', f'{DCGM_DRIVER_VERSION.current}="')
    return renamed.replace('{Hostname="', '{hostname="'), values


def gpu_identity(node: str) -> dict[str, str]:
    return {"Hostname": node, "gpu": "0", "UUID": UUIDS[node]}


def allocatable(node: str) -> str:
    return f'kube_node_status_allocatable{{node="{node}", resource="nvidia_com_gpu", unit="integer", {OTHER}}}'


def gpu_request(namespace: str, pod: str, node: str) -> str:
    return (
        f'kube_pod_container_resource_requests{{namespace="{namespace}", pod="{pod}", container="main", '
        f'node="{node}", resource="nvidia_com_gpu", unit="integer", uid="{pod}-uid", {OTHER}}}'
    )


def phase(namespace: str, pod: str, name: str) -> str:
    return f'kube_pod_status_phase{{namespace="{namespace}", pod="{pod}", phase="{name}", uid="{pod}-uid", {OTHER}}}'


def start_time(namespace: str, pod: str) -> str:
    return f'kube_pod_start_time{{namespace="{namespace}", pod="{pod}", uid="{pod}-uid", {OTHER}}}'


def _up_labels(target: str) -> dict[str, str]:
    """The labels of one exporter target's `up` series (what the ServiceMonitor's scrape gives it)."""
    return {
        "job": "nvidia-dcgm-exporter",
        "namespace": "gpu-operator",
        "instance": f"{target}:9400",
        "pod": f"nvidia-dcgm-exporter-{target[-1]}",
        "service": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "container": "nvidia-dcgm-exporter",
    }


def up(target: str) -> str:
    return "up{" + ", ".join(f'{k}="{v}"' for k, v in _up_labels(target).items()) + "}"


@dataclass(frozen=True)
class Expected:
    """One alert expected to fire: its labels (without alertname) and how its value renders in templates."""

    labels: dict[str, str]
    value: str


@dataclass(frozen=True)
class Case:
    alert: str
    why: str
    series: list[tuple[str, str]]
    # eval_time -> alerts firing then (an empty list: none may fire).
    evals: dict[str, list[Expected]] = field(default_factory=dict)
    interval: str = "1m"


def _pod(
    namespace: str, pod: str, node: str, *, since_minute: int = 0, phase_name: str = "Running"
) -> list[tuple[str, str]]:
    """KSM series of a GPU pod over 26 h at 1m: requests, its phases (1 for the current one), start time."""
    before = f"_x{since_minute - 1} " if since_minute else ""
    samples = 26 * 60 - since_minute
    return [
        (gpu_request(namespace, pod, node), f"{before}1x{samples}"),
        *(
            (phase(namespace, pod, p), f"{before}{1 if p == phase_name else 0}x{samples}")
            for p in ("Pending", "Running", "Succeeded")
        ),
        (start_time(namespace, pod), f"{before}{since_minute * 60}x{samples}"),
    ]


XID_MSG = "GPU has fallen off the bus"
CASES: list[Case] = [
    Case(
        "GpuXidErrors",
        "a new XID code fires at once, and stops once it is older than the window (the gauge is sticky)",
        [(dcgm("DCGM_FI_DEV_XID_ERRORS", DC1, extra=f', err_code="79", err_msg="{XID_MSG}"'), "_x20 79x40")],
        {
            "21m": [Expected({**gpu_identity(DC1), "err_code": "79", "err_msg": XID_MSG, "severity": "warning"}, "79")],
            "45m": [],
        },
    ),
    Case(
        "GpuXidErrors",
        "a GPU that never reported an XID (value 0) stays silent",
        [(dcgm("DCGM_FI_DEV_XID_ERRORS", DC2, extra=', err_code="0", err_msg="No Error"'), "0x60")],
        {"5m": [], "30m": []},
    ),
    Case(
        "GpuTemperatureHigh",
        "above 85 °C for 5 minutes fires, even though the pod using the GPU changed meanwhile",
        [
            (dcgm("DCGM_FI_DEV_GPU_TEMP", DC1, pod="resnet-lab-0", namespace="team-vision"), "90x4 _x10"),
            (dcgm("DCGM_FI_DEV_GPU_TEMP", DC1, pod="llm-scratch-0", namespace="team-nlp"), "_x4 90x10"),
        ],
        {"4m": [], "7m": [Expected({**gpu_identity(DC1), "severity": "warning"}, "90")]},
    ),
    Case(
        "GpuTemperatureHigh",
        "exactly 85 °C, or above it for less than 5 minutes, stays silent",
        [(dcgm("DCGM_FI_DEV_GPU_TEMP", DC2), "85x30"), (dcgm("DCGM_FI_DEV_GPU_TEMP", DC3), "95x3 70x20")],
        {"4m": [], "20m": []},
    ),
    Case(
        "GpuFramebufferNearlyFull",
        "97.5% of the card's memory used for 10 minutes fires",
        [(dcgm("DCGM_FI_DEV_FB_USED", DC1), "7800x20"), (dcgm("DCGM_FI_DEV_FB_FREE", DC1), "200x20")],
        {"9m": [], "12m": [Expected({**gpu_identity(DC1), "severity": "warning"}, "97.5%")]},
    ),
    Case(
        "GpuFramebufferNearlyFull",
        "93% used stays silent",
        [(dcgm("DCGM_FI_DEV_FB_USED", DC2), "7600x20"), (dcgm("DCGM_FI_DEV_FB_FREE", DC2), "592x20")],
        {"12m": []},
    ),
    Case(
        "GpuNodeAllocatableBelowProfile",
        "a node advertising 0 and a node with no series at all fire; a node at its profile does not",
        [(allocatable(DC1), "0x15"), (allocatable(DC2), "4x15")],
        {
            "9m": [],
            "12m": [
                Expected({"node": DC1, "severity": "warning"}, "0"),
                Expected({"node": DC3, "severity": "warning"}, "0"),
            ],
        },
    ),
    Case(
        "GpuNodeAllocatableBelowProfile",
        "every node at its profile stays silent",
        [(allocatable(DC1), "4x15"), (allocatable(DC2), "4x15"), (allocatable(DC3), "1x15")],
        {"12m": []},
    ),
    Case(
        "GpuPoolCapacityBelowConfigured",
        "the pool at 5 of 9 fires; a GPU node outside the pool does not make up for it",
        [
            (allocatable(DC1), "0x20"),
            (allocatable(DC2), "4x20"),
            (allocatable(DC3), "1x20"),
            (allocatable("other-gpu-worker"), "8x20"),
        ],
        {"14m": [], "16m": [Expected({"severity": "critical"}, "5")]},
    ),
    Case(
        "GpuPoolCapacityBelowConfigured",
        "the pool at 9 of 9 stays silent",
        [(allocatable(DC1), "4x20"), (allocatable(DC2), "4x20"), (allocatable(DC3), "1x20")],
        {"16m": []},
    ),
    Case(
        "GpuHeldWhileIdle",
        "a pod holding an idle card for over 24 h fires; a busy card, a young pod and a finished pod do not",
        [
            *_pod("team-vision", "resnet-lab-0", DC1),
            (dcgm("DCGM_FI_DEV_GPU_UTIL", DC1, pod="resnet-lab-0", namespace="team-vision"), "2x1560"),
            *_pod("team-nlp", "llm-scratch-0", DC2),
            (dcgm("DCGM_FI_DEV_GPU_UTIL", DC2, pod="llm-scratch-0", namespace="team-nlp"), "3x1000 40 3x559"),
            *_pod("katib-sweeps", "lr-sweep-trial-0", DC3, since_minute=21 * 60),
            *_pod("gpu-smoke-test", "cuda-smoke-dc3-0", DC3, phase_name="Succeeded"),
            (dcgm("DCGM_FI_DEV_GPU_UTIL", DC3), "0x1560"),
        ],
        {
            "24h": [],
            "26h": [
                Expected({"namespace": "team-vision", "pod": "resnet-lab-0", "node": DC1, "severity": "info"}, "1")
            ],
        },
    ),
    Case(
        "DcgmExporterDown",
        "one exporter down fires for that target and for the count of 2 of 3",
        [(up("10.42.1.7"), "1x15"), (up("10.42.2.7"), "1x15"), (up("10.42.3.7"), "0x15")],
        {
            "9m": [],
            "12m": [
                Expected({**_up_labels("10.42.3.7"), "severity": "warning"}, "0"),
                Expected({"severity": "warning"}, "2"),
            ],
        },
    ),
    Case(
        "DcgmExporterDown",
        "no exporter target at all (never scheduled, not selected) fires",
        [(f"up{{{OTHER}}}", "1x15")],
        {"12m": [Expected({"severity": "warning"}, "0")]},
    ),
    Case(
        "DcgmExporterDown",
        "three exporters up stay silent",
        [(up("10.42.1.7"), "1x15"), (up("10.42.2.7"), "1x15"), (up("10.42.3.7"), "1x15")],
        {"12m": []},
    ),
]
