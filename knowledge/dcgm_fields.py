"""The DCGM fields gpu-pool has dcgm-exporter collect, with why each default stays or goes.

The exporter's defaults are `../shared/upstream/dcgm-exporter/{default-counters,dcp-metrics-included}.csv`
(4.5.3-4.8.2, the version GPU Operator v26.3.2 ships); the contract tests compare this table with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple

from knowledge.metric_names import counters_name

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
DEFAULT_FIELDS: tuple[DcgmField, ...] = (
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
EXTRA_FIELDS: tuple[DcgmField, ...] = (
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
    return DEFAULT_FIELDS + EXTRA_FIELDS + PROFILING_FIELDS


def exported_metric_names(exporter_version: str = "") -> frozenset[str]:
    """The metric names Prometheus sees from gpu-pool's counters file for that exporter image (the file's names,
    knowledge.metric_names.counters_name): every field except `label` fields, which become labels."""
    return frozenset(
        counters_name(field.field_id, exporter_version) for field in dcgm_fields() if field.prom_type != "label"
    )
