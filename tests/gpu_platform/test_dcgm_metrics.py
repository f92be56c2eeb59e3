"""The DCGM exporter counters file: a format the exporter accepts, and every metric the dashboard and
alerts need."""

from __future__ import annotations

import csv
import io

import kubernetes_validate
import pytest

from components.gpu_platform.dcgm_metrics import (
    DCGM_METRICS_CONFIGMAP,
    build_dcgm_metrics_configmap,
    build_dcgm_metrics_csv,
    csv_line,
)
from components.gpu_platform.promql import DCGM_METRICS_USED, DCGM_NAMES_USED
from knowledge.dcgm_fields import (
    DROPPED_DEFAULT_FIELDS,
    PROFILING_FIELDS,
    DcgmField,
    dcgm_fields,
    exported_metric_names,
)
from knowledge.gpu_operator import DCGM_METRICS_KEY
from tests.gpu_platform.promql_inspection import EXPORTER_VERSIONS


def exporter_records(text: str) -> list[list[str]]:
    """Read a counters file the way dcgm-exporter does: Go encoding/csv with '#' comments, blank lines
    skipped, every field whitespace-trimmed, exactly three fields per record or the file is refused."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    records = [[cell.strip() for cell in row] for row in csv.reader(io.StringIO("\n".join(lines)))]
    for record in records:
        assert len(record) == 3, f"the exporter refuses a record without exactly 3 fields: {record}"
    return records


def test_the_csv_has_one_three_field_record_per_field_in_declared_order() -> None:
    records = exporter_records(build_dcgm_metrics_csv())

    assert [record[0] for record in records] == [field.field_id for field in dcgm_fields()]
    assert [record[2] for record in records] == [field.help_text for field in dcgm_fields()]


def test_every_record_uses_a_metric_type_the_exporter_understands() -> None:
    types = {record[1] for record in exporter_records(build_dcgm_metrics_csv())}

    assert types <= {"gauge", "counter", "label"}


def test_no_field_is_listed_twice() -> None:
    ids = [field.field_id for field in dcgm_fields()]

    assert len(ids) == len(set(ids))


def test_label_fields_become_labels_not_metrics() -> None:
    labels = {field.field_id for field in dcgm_fields() if field.prom_type == "label"}
    metrics = {field.field_id for field in dcgm_fields() if field.prom_type != "label"}

    assert "DCGM_FI_DRIVER_VERSION" in labels
    assert not labels & exported_metric_names()
    assert exported_metric_names() == metrics


@pytest.mark.parametrize("version", EXPORTER_VERSIONS)
def test_the_csv_exports_every_dcgm_metric_the_dashboard_and_alerts_use_under_each_exporter(version: str) -> None:
    missing = [metric.legacy for metric in DCGM_METRICS_USED if not set(metric.names) & exported_metric_names(version)]

    assert not missing, f"dashboard/alerts would watch metrics the exporter never emits: {sorted(missing)}"


def test_the_brief_s_fields_for_memory_heat_power_load_and_errors_are_exported() -> None:
    required = {
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    }

    assert required <= exported_metric_names()


def test_nothing_the_dashboard_or_alerts_use_depends_on_profiling_support() -> None:
    # The A1000 may not serve DCP fields; the exporter then skips them, so anything built on one
    # would be dead on this hardware.
    profiling = {field.field_id for field in PROFILING_FIELDS}

    assert all(field_id.startswith("DCGM_FI_PROF_") for field_id in profiling)
    assert not DCGM_NAMES_USED & profiling


def test_deliberately_dropped_defaults_are_really_absent_and_say_why() -> None:
    ids = {field.field_id for field in dcgm_fields()}

    for field_id, reason in DROPPED_DEFAULT_FIELDS.items():
        assert field_id not in ids
        assert len(reason) > 20, f"{field_id} needs a real reason"


@pytest.mark.parametrize("bad", [",", '"', "\n"])
def test_a_help_text_that_would_break_the_exporter_s_csv_reader_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="DCGM_FI_DEV_GPU_TEMP"):
        csv_line(DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", f"GPU temperature{bad} in C"))


def test_the_configmap_is_a_valid_v1_configmap_under_the_key_the_operator_mounts() -> None:
    configmap = build_dcgm_metrics_configmap("gpu-operator")

    kubernetes_validate.validate(configmap, kubernetes_validate.latest_version(), strict=True)
    assert configmap["metadata"]["name"] == DCGM_METRICS_CONFIGMAP == "dcgm-custom-metrics"
    assert configmap["metadata"]["namespace"] == "gpu-operator"
    assert list(configmap["data"]) == [DCGM_METRICS_KEY] == ["dcgm-metrics.csv"]
    assert configmap["data"][DCGM_METRICS_KEY] == build_dcgm_metrics_csv()


def test_two_builds_of_the_csv_and_configmap_are_identical() -> None:
    assert build_dcgm_metrics_csv() == build_dcgm_metrics_csv()
    assert build_dcgm_metrics_configmap("gpu-operator") == build_dcgm_metrics_configmap("gpu-operator")
