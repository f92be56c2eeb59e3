"""Reading dcgm-exporter's per-pod utilisation from a Prometheus answer (the pure half of `--prometheus`)."""

from __future__ import annotations

from typing import Any

import promql_parser
import pytest

from day2.claims.prometheus import holder_of, idle_holders, peak_utilisation_query, peaks_from_response

DAY = 86400


def test_the_query_is_promql_grouping_by_both_label_shapes_over_the_window() -> None:
    query = peak_utilisation_query(24)
    parsed = promql_parser.parse(query)

    assert isinstance(parsed, promql_parser.AggregateExpr)
    assert parsed.modifier is not None
    assert set(parsed.modifier.labels) == {"exported_namespace", "exported_pod", "namespace", "pod"}
    assert "max_over_time(DCGM_FI_DEV_GPU_UTIL[24h])" in query


def test_behind_the_service_monitor_the_holder_is_in_the_exported_labels() -> None:
    labels = {
        "pod": "nvidia-dcgm-exporter-bqh48",
        "namespace": "gpu-operator",
        "exported_pod": "nb-0",
        "exported_namespace": "team",
    }

    assert holder_of(labels) == ("team", "nb-0")


def test_scraped_with_honor_labels_the_holder_is_in_the_plain_labels() -> None:
    assert holder_of({"pod": "nb-0", "namespace": "team"}) == ("team", "nb-0")


def test_a_gpu_no_pod_holds_names_no_holder() -> None:
    assert holder_of({"Hostname": "n1", "gpu": "0"}) is None


def answer(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [1777888800, v]} for m, v in samples]},
    }


def test_peaks_are_read_per_holder_taking_the_highest_series() -> None:
    peaks = peaks_from_response(
        answer(
            ({"pod": "a", "namespace": "t"}, "3"), ({"exported_pod": "a", "exported_namespace": "t"}, "7"), ({}, "1")
        )
    )

    assert peaks == {("t", "a"): 7.0}


@pytest.mark.parametrize("body", [{"status": "error"}, {"status": "success", "data": {"resultType": "matrix"}}])
def test_an_answer_that_is_not_an_instant_vector_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        peaks_from_response(body)


@pytest.mark.parametrize(
    ("peak", "held", "idle"),
    [(5.0, 2 * DAY, True), (5.5, 2 * DAY, False), (0.0, DAY, True), (0.0, DAY - 1, False)],
    ids=["at 5% is idle", "above 5% is not", "held exactly the window", "held less than the window"],
)
def test_idle_means_never_above_the_threshold_over_a_window_the_pod_held_the_gpu_for(
    peak: float, held: int, idle: bool
) -> None:
    flagged = idle_holders({("t", "a"): peak}, {("t", "a"): held}, hours=24, percent=5)

    assert (("t", "a") in flagged) is idle


def test_a_holder_without_any_series_is_not_called_idle() -> None:
    assert idle_holders({}, {("t", "a"): 30 * DAY}, hours=24, percent=5) == frozenset()
