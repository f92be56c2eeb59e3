"""The DCGM exporter's metric list (`dcgm-metrics.csv`), as our own data, shipped in a ConfigMap.

The GPU Operator runs dcgm-exporter with the image's `dcp-metrics-included.csv` unless
`dcgmExporter.config.name` names a ConfigMap in the operator namespace whose key is `dcgm-metrics.csv`.
Pointing it at this ConfigMap makes the metric set part of the plan: the dashboard and the alerts are
checked against `exported_metric_names()`, so none of them can watch a metric the exporter never emits.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

DCGM_METRICS_CONFIGMAP = "dcgm-custom-metrics"
# The operator mounts the ConfigMap and reads exactly this key.
DCGM_METRICS_KEY = "dcgm-metrics.csv"

PromType = Literal["gauge", "counter", "label"]


class DcgmField(NamedTuple):
    """One CSV line: a DCGM field id, how the exporter exposes it, and its Prometheus HELP text.

    `label` fields are not metrics: the exporter attaches their value as a label to every other metric.
    """

    field_id: str
    prom_type: PromType
    help_text: str


# What the exporter enables by default (its default-counters.csv and dcp-metrics-included.csv list the
# same enabled fields in 4.5.3-4.8.2, the version GPU Operator v26.3.2 ships), minus DROPPED_DEFAULT_FIELDS.
_DEFAULT_FIELDS: tuple[DcgmField, ...] = (
    # Clocks
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "Streaming multiprocessor clock (MHz)."),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock (MHz)."),
    # Temperature
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (C)."),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU core temperature (C)."),
    # Power
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Board power draw (W)."),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy used since the driver loaded (mJ)."),
    # PCIe
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe replays (link-level retries)."),
    # Utilisation; the sampling period depends on the product
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "Share of time a kernel was running on the GPU (%)."),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Share of time device memory was read or written (%)."),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", "gauge", "Video encoder utilisation (%)."),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", "gauge", "Video decoder utilisation (%)."),
    # Errors
    DcgmField("DCGM_FI_DEV_XID_ERRORS", "gauge", "Code of the most recent XID error (0 if none since start)."),
    # Framebuffer memory
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (MiB)."),
    DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (MiB)."),
    DcgmField("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved by the driver (MiB)."),
    # Row remapping (memory health)
    DcgmField("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped after uncorrectable errors."),
    DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped after correctable errors."),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "1 if a row remapping has failed."),
    # Static information, attached as a label to every metric
    DcgmField("DCGM_FI_DRIVER_VERSION", "label", "NVIDIA driver version."),
)

# Profiling (DCP) fields. The exporter enables these five by default. Whether an RTX A1000 serves them
# is not documented: DCGM profiling is specified for datacenter (ex-Tesla) GPUs from Volta on, NVIDIA's
# maintainers add Quadro RTX and RTX A6000 (dcgm-exporter#5), GeForce cards get none (dcgm-exporter#152,
# #404), and the A1000 (GA107, workstation) is on no list. Keeping them costs nothing: on a card without
# profiling support the exporter skips each DCP line with a warning and carries on (dcgm-exporter#158,
# #707); on a card with it they simply appear. So they stay in the CSV, but no dashboard panel and no
# alert depends on one: utilisation comes from DCGM_FI_DEV_GPU_UTIL (NVML), which every card reports.
PROFILING_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine was active."),
    DcgmField("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor pipe was active."),
    DcgmField("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the memory interface was busy."),
    DcgmField("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe transmit rate incl. protocol headers (B/s)."),
    DcgmField("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe receive rate incl. protocol headers (B/s)."),
)

# Beyond the defaults. The A1000 draws all its power from the slot (about 50 W) inside a mini PC, so
# power and thermal throttling are the first suspects when a job runs slower than it should.
_EXTRA_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Power limit the driver enforces (W)."),
    DcgmField("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Cumulative time clocks were held down by the power cap."),
    DcgmField("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Cumulative time clocks were held down by temperature."),
)

# Default fields deliberately left out, with the reason. Everything else the exporter emits by default
# stays, so switching from the image's CSV to ours never silently drops a metric someone relies on.
DROPPED_DEFAULT_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "the RTX A1000 has no NVLink; the field can never carry a value",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": (
            "the A1000 supports no vGPU and the pool passes each card whole into one VM (vgpuManager off)"
        ),
    }
)


def dcgm_fields() -> tuple[DcgmField, ...]:
    """Every field the exporter collects, in CSV order."""
    return _DEFAULT_FIELDS + _EXTRA_FIELDS + PROFILING_FIELDS


def csv_line(field: DcgmField) -> str:
    """One `DCGM_FI_X, <type>, <help>` record."""
    # The exporter reads this file with Go's encoding/csv expecting exactly three fields per record:
    # a comma or quote inside the help text would make it refuse the whole file and expose nothing.
    for forbidden in (",", '"', "\n", "\r"):
        if forbidden in field.help_text:
            raise ValueError(f"help text of {field.field_id} must not contain {forbidden!r}: {field.help_text!r}")
    return f"{field.field_id}, {field.prom_type}, {field.help_text}"


def build_dcgm_metrics_csv() -> str:
    """The exporter's counters file: `# comment` lines and `DCGM_FI_X, <type>, <help>` records."""
    lines = [
        "# DCGM exporter counters for the gpu-pool GPUs (generated by gpu-pool; edit components/dcgm_metrics.py).",
        "# Format: DCGM field, Prometheus metric type (gauge, counter or label), help message",
        "",
        "# Exporter defaults",
        *(csv_line(field) for field in _DEFAULT_FIELDS),
        "",
        "# Power and thermal limits",
        *(csv_line(field) for field in _EXTRA_FIELDS),
        "",
        "# Profiling (DCP): emitted only where the card supports profiling; nothing depends on them",
        *(csv_line(field) for field in PROFILING_FIELDS),
    ]
    return "\n".join(lines) + "\n"


def build_dcgm_metrics_configmap(namespace: str) -> dict[str, Any]:
    """The ConfigMap `dcgmExporter.config.name` points at; it must live in the GPU Operator's namespace."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DCGM_METRICS_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-pool", "app.kubernetes.io/component": "dcgm-exporter"},
        },
        "data": {DCGM_METRICS_KEY: build_dcgm_metrics_csv()},
    }


def exported_metric_names() -> frozenset[str]:
    """The metric names Prometheus sees: every field id except `label` fields, which become labels."""
    return frozenset(field.field_id for field in dcgm_fields() if field.prom_type != "label")
