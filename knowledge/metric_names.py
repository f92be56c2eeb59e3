"""Metric and label names of the exporters the GPU alerts, recording rules and dashboard read.

DCGM fields are read through one contract: `DcgmMetric` records each field's name up to dcgm-exporter 4.8.x and
its newer name, with the source of each, and `dcgm_series()` is the only way a query reads one: it selects both
names (and both node label names) and returns the value in one unit. kube-state-metrics names are checked against
`../shared/upstream/kube-state-metrics/metric-names.txt`, DCGM names against `../shared/upstream/dcgm/` (contract
tests); tests/gpu_platform/test_metric_contract.py fails on a `DCGM_FI_` name written anywhere else.

What the exporter does with a counters file (NVIDIA/dcgm-exporter internal/pkg/counters/counter_config.go,
`ExtractCounters`, identical at tag 4.5.3-4.8.2 and main d5e5f510 of 2026-05-12, the newest public snapshot):
- the Prometheus metric is named after the file's first column as written (`FieldName: record[0]`, rendered by
  internal/pkg/rendermetrics/render_metrics.go), never after DCGM's current name: a 4.8-named file keeps
  emitting 4.8 names under a newer exporter, as long as that exporter resolves them;
- the name is resolved with go-dcgm's `GetFieldID`, which looks in the current map, then in `legacyDCGMFields`
  (go-dcgm ec245c0 "resolve deprecated #define aliases into legacyDCGMFields", the one 4.5.3-4.8.2 pins);
- a name neither map knows fails the whole file ("could not find DCGM field"): the exporter exits and exposes
  nothing. So a file may only use names the deployed exporter's go-dcgm knows.
The newer names (`DCGM_FI_DEV_GPU_TEMP_CELSIUS`, ...) appear in go-dcgm with "add DCGM 4.6 support" (4e88f84,
2026-07-07), after the go-dcgm 4.5.3-4.8.2 pins (ec245c0, 2026-04-22), which knows only the 4.8 names. go-dcgm's
newest commit (b7fa315, DCGM 4.6.1) still resolves every 4.8 name (to the same field id: the renames are
aliases, so the value and its unit do not change). Fields whose *unit* changed got new ids instead (clocks in Hz,
energy in J: go-dcgm base_unit_fields_test.go "different units must retain different field IDs").
Not verifiable here: the 4.9.x and 4.10.x exporter tags are not in the public snapshot (its newest tag is
4.5.3-4.8.2), so which go-dcgm they pin is inferred (they post-date 4e88f84), and the rename of the PROF
`_BYTES` fields to `_BYTES_PER_SECOND` is in no go-dcgm or DCGM header available (b7fa315 still has
`DCGM_FI_PROF_PCIE_TX_BYTES`); gpu-pool ships only names the contract records. Checked again on 2026-12-05: the
snapshot still ends at tag 4.5.3-4.8.2 (main d5e5f510); the newest public dcgm-exporter commit found, 7ad58324 (a
main commit whose hack/versions.env says DCGM 4.6.0, exporter 4.8.3, and whose go.mod pins go-dcgm v1.4601.1), still
names the 4.8 fields in etc/default-counters.csv (DCGM_FI_DEV_GPU_TEMP, _POWER_USAGE, _XID_ERRORS, _GPU_UTIL, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

# go-dcgm commits the contract was read from (github.com/NVIDIA/go-dcgm pkg/dcgm/const_fields.go).
GO_DCGM_4_8: Final = "go-dcgm ec245c0 (pinned by dcgm-exporter 4.5.3-4.8.2 go.mod)"
GO_DCGM_RENAMES: Final = "go-dcgm 4e88f84 'add DCGM 4.6 support' (DCGM 4.6.0 dcgm_fields.h aliases)"
GO_DCGM_BASE_UNITS: Final = "go-dcgm b7fa315 'add DCGM 4.6.1 support' (base_unit_fields_test.go)"


@dataclass(frozen=True)
class DcgmMetric:
    """One DCGM field as Prometheus sees it under each exporter line, and how a query gets it in one unit.

    legacy: the name dcgm-exporter up to 4.8.x knows (and its own default counters use).
    current: DCGM's newer name for the same quantity.
    unit: what every query built by dcgm_series() returns.
    current_scale: multiplies a `current`-named series into `unit`: 1 where the newer name is an alias of the
    same field id (the value is the same number), else the unit conversion.
    same_field: whether `current` is an alias of the same field id (a counters file may then use either name).
    source: where the two names and the unit come from.
    """

    legacy: str
    current: str
    unit: str
    source: str
    current_scale: float = 1.0
    same_field: bool = True

    @property
    def names(self) -> tuple[str, str]:
        return (self.legacy, self.current)


def _alias(legacy: str, current: str, unit: str) -> DcgmMetric:
    return DcgmMetric(legacy, current, unit, f"{GO_DCGM_RENAMES}: #define {legacy} {current}")


DCGM_GPU_UTIL: Final = _alias("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", "percent")
DCGM_GPU_TEMP: Final = _alias("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "celsius")
DCGM_MEMORY_TEMP: Final = _alias("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", "celsius")
DCGM_POWER_USAGE: Final = _alias("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS", "watt")
DCGM_POWER_LIMIT: Final = _alias(
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS", "watt"
)
DCGM_XID_ERRORS: Final = _alias("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", "xid")
DCGM_PCIE_REPLAY: Final = _alias("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL", "replays")
DCGM_ROWS_UNCORRECTABLE: Final = _alias(
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "rows"
)
DCGM_ROWS_CORRECTABLE: Final = _alias(
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "rows"
)
DCGM_ROW_REMAP_FAILURE: Final = _alias("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED", "bool")
DCGM_DRIVER_VERSION: Final = _alias("DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION", "label")
DCGM_NVLINK_TOTAL: Final = _alias(
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", "counter"
)
DCGM_PROF_GR_ENGINE: Final = _alias("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "ratio")
DCGM_PROF_TENSOR: Final = _alias("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", "ratio")
DCGM_PROF_DRAM: Final = _alias("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO", "ratio")
# Fields that kept their name (both columns equal): read through the contract all the same.
DCGM_MEM_COPY_UTIL: Final = DcgmMetric(
    "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "percent", f"{GO_DCGM_RENAMES}: unchanged"
)
DCGM_FB_USED: Final = DcgmMetric("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED", "MiB", f"{GO_DCGM_RENAMES}: unchanged")
DCGM_FB_FREE: Final = DcgmMetric("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE", "MiB", f"{GO_DCGM_RENAMES}: unchanged")
# Unit changes are new fields with new ids (the 4.8 ids stay valid): reading the Hz/J field gives MHz/mJ here.
DCGM_SM_CLOCK: Final = DcgmMetric(
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", "MHz", f"{GO_DCGM_BASE_UNITS}: id 100 (MHz) vs 1603 (Hz)",
    current_scale=1e-6, same_field=False,
)  # fmt: skip
DCGM_MEM_CLOCK: Final = DcgmMetric(
    "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "MHz",
    f"{GO_DCGM_BASE_UNITS}: id 101 (MHz) vs 1604 (Hz)", current_scale=1e-6, same_field=False,
)  # fmt: skip
DCGM_ENERGY: Final = DcgmMetric(
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "mJ",
    f"{GO_DCGM_BASE_UNITS}: id 156 (mJ) vs 1611 (J)", current_scale=1000.0, same_field=False,
)  # fmt: skip

DCGM_CONTRACT: Final[tuple[DcgmMetric, ...]] = (
    DCGM_GPU_UTIL,
    DCGM_MEM_COPY_UTIL,
    DCGM_FB_USED,
    DCGM_FB_FREE,
    DCGM_GPU_TEMP,
    DCGM_MEMORY_TEMP,
    DCGM_POWER_USAGE,
    DCGM_POWER_LIMIT,
    DCGM_XID_ERRORS,
    DCGM_PCIE_REPLAY,
    DCGM_ROWS_UNCORRECTABLE,
    DCGM_ROWS_CORRECTABLE,
    DCGM_ROW_REMAP_FAILURE,
    DCGM_DRIVER_VERSION,
    DCGM_NVLINK_TOTAL,
    DCGM_PROF_GR_ENGINE,
    DCGM_PROF_TENSOR,
    DCGM_PROF_DRAM,
    DCGM_SM_CLOCK,
    DCGM_MEM_CLOCK,
    DCGM_ENERGY,
)


def contract_of(name: str) -> DcgmMetric | None:
    """The contract entry that knows this DCGM name under either exporter line."""
    return next((metric for metric in DCGM_CONTRACT if name in metric.names), None)


# --- which names a counters file may use, by exporter version --------------------------------------------------
# The GPU Operator chart's default exporter image (`dcgmExporter.version` in each chart's values.yaml; the contract
# test reads both). Tags are `<DCGM>-<exporter>[-<flavour>]`.
CHART_DCGM_EXPORTER_VERSION: Final = {"v26.3.2": "4.5.3-4.8.2-distroless", "v26.7.0": "4.6.0-4.8.3-distroless"}
# The first exporter line whose go-dcgm resolves the newer names: 4.9 (the first line after go-dcgm 4e88f84;
# 4.6.0-4.8.3's go.mod is not in the public snapshot, so it gets the names every go-dcgm read resolves).
CURRENT_NAMES_SINCE: Final = (4, 9)
_EXPORTER_TAG = re.compile(r"^v?\d+\.\d+\.\d+-(\d+)\.(\d+)\.\d+(?:-[A-Za-z0-9.]+)?$")


def exporter_line(version: str) -> tuple[int, int] | None:
    """The exporter's (major, minor) from an image tag like `4.5.3-4.8.2-distroless`; None if not such a tag."""
    match = _EXPORTER_TAG.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def uses_current_names(exporter_version: str) -> bool:
    """Whether gpu-pool's counters file names fields by their newer names for this exporter image.

    The 4.8 names for every line up to 4.8.x and for a tag that is not `<DCGM>-<exporter>` (those names resolve in
    every go-dcgm read); the newer names from 4.9 on, where the 4.8 names are deprecated aliases (DCGM removes
    deprecated fields in time: 4.7 dropped DCGM_FI_DEV_PCIE_*_THROUGHPUT and exporter 4.8.4 refuses a file naming
    them, netdata/netdata#23964).
    """
    line = exporter_line(exporter_version)
    return line is not None and line >= CURRENT_NAMES_SINCE


def counters_name(field_id: str, exporter_version: str) -> str:
    """The name a counters file gives this field for that exporter: the newer one only for a same-field alias."""
    metric = contract_of(field_id)
    if metric is None or not metric.same_field or not uses_current_names(exporter_version):
        return field_id
    return metric.current


# --- kube-state-metrics and Prometheus -----------------------------------------------------------------------
KSM_NODE_ALLOCATABLE: Final = "kube_node_status_allocatable"
KSM_POD_REQUESTS: Final = "kube_pod_container_resource_requests"
KSM_POD_PHASE: Final = "kube_pod_status_phase"
KSM_POD_START_TIME: Final = "kube_pod_start_time"
# Every Node condition, custom ones included (labels node, condition, status=true|false|unknown).
KSM_NODE_CONDITION: Final = "kube_node_status_condition"
KSM_NODE_UNSCHEDULABLE: Final = "kube_node_spec_unschedulable"
KSM_CRONJOB_LAST_SUCCESS: Final = "kube_cronjob_status_last_successful_time"

PROMETHEUS_UP: Final = "up"

# kube-state-metrics turns the extended resource `nvidia.com/gpu` into this label value.
KSM_GPU_RESOURCE: Final = 'resource="nvidia_com_gpu"'
# The labels that identify one physical GPU in dcgm-exporter output.
GPU_IDENTITY: Final = "Hostname, gpu, UUID"
# The node a DCGM series comes from: `Hostname` up to dcgm-exporter 4.5.3-4.8.2 (the GPU Operator v26.3.2's), then
# `hostname` (NVIDIA/dcgm-exporter#655, commit d5e5f510 of 2026-05-12 on main after that tag: "Rename Hostname label
# to hostname", in internal/pkg/rendermetrics/render_metrics.go). Which release first ships it is not in the public
# snapshot (the newest tag there is 4.5.3-4.8.2; the GPU Operator v26.7.0 runs 4.6.0-4.8.3), so every query reads
# either: dcgm_node() copies `hostname` into `Hostname` where the exporter wrote the new name.
DCGM_NODE_LABEL: Final = "Hostname"
DCGM_NODE_LABEL_RENAMED: Final = "hostname"


def dcgm_node(expr: str) -> str:
    """`expr` (an instant vector of DCGM series) with its node in `Hostname`, whichever name the exporter used."""
    return f'label_replace({expr}, "{DCGM_NODE_LABEL}", "$1", "{DCGM_NODE_LABEL_RENAMED}", "(.+)")'


def _one_name(name: str, scale: float, matchers: str, offset: str, over_time: tuple[str, str] | None) -> str:
    selector = f"{name}{{{matchers}}}" if matchers else name
    if over_time is not None:
        function, window = over_time
        selector = f"{function}({selector}[{window}]{f' offset {offset}' if offset else ''})"
    elif offset:
        selector = f"{selector} offset {offset}"
    # `* 1` would change nothing but drop the name; a scale is written only where the unit differs.
    return selector if scale == 1.0 else f"({selector} * {scale:g})"


def dcgm_series(
    metric: DcgmMetric,
    *,
    node_regex: str | None = None,
    offset: str = "",
    over_time: tuple[str, str] | None = None,
) -> str:
    """The one way a rule, alert or panel reads a DCGM field: under either name and either node label name, in
    `metric.unit`, with the node in `Hostname`.

    node_regex: only the nodes it matches (as written inside a double-quoted PromQL string).
    offset: read that long ago. over_time: (function, window), e.g. ("max_over_time", "2h"), applied per name
    before the two are joined (a range selector cannot span two metric names).
    Where one target exposes both names (never the case with one counters file) the 4.8 name wins: `or` keeps the
    left side's series for a label set both sides have.
    """
    node_matchers = (
        [f'{DCGM_NODE_LABEL}=~"{node_regex}"', f'{DCGM_NODE_LABEL_RENAMED}=~"{node_regex}"'] if node_regex else [""]
    )
    parts: list[str] = []
    for name, scale in ((metric.legacy, 1.0), (metric.current, metric.current_scale)):
        if parts and name == metric.legacy:
            break  # a field that kept its name
        parts += [_one_name(name, scale, matchers, offset, over_time) for matchers in node_matchers]
    return dcgm_node(f"({' or '.join(parts)})")


def dcgm_on_nodes(metric: DcgmMetric, node_regex: str) -> str:
    """A DCGM field on the nodes `node_regex` matches: dcgm_series() with a node filter."""
    return dcgm_series(metric, node_regex=node_regex)
