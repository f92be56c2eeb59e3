"""`claims --prometheus` against a real Prometheus (Debian's package) on loopback with backfilled DCGM data.

The article's notebooks: two held their cards for days without using them; the Katib trial drove its card
at 98%. Skipped without prometheus/promtool locally; on CI (`CI` set) their absence fails.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from day2.cli import main
from tests.day2.k8s_objects import NOW, NOW_TEXT, dump
from tests.day2.prometheus_server import backfill, openmetrics, running_prometheus
from tests.day2.scenarios import NODES, notebooks
from tests.gpu_platform.prometheus_tools import require

GPU = {"gpu": "0", "device": "nvidia0", "modelName": "NVIDIA RTX A1000", "pci_bus_id": "00000000:01:00.0"}
TARGET = {"job": "nvidia-dcgm-exporter", "instance": "10.42.1.7:9400", "service": "nvidia-dcgm-exporter"}


def utilisation(values: dict[int, float], default: float) -> list[tuple[Any, float]]:
    """A sample a minute over the 26 h before NOW; `values` overrides by minutes-ago."""
    return [(NOW - timedelta(minutes=ago), values.get(ago, default)) for ago in range(26 * 60, -1, -1)]


def series() -> str:
    exporter_pod = {
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-bqh48",
        "container": "nvidia-dcgm-exporter",
    }
    return openmetrics(
        [
            # Behind the operator's ServiceMonitor (honorLabels false): the holder is in exported_*.
            (
                "DCGM_FI_DEV_GPU_UTIL",
                {
                    **GPU,
                    **TARGET,
                    **exporter_pod,
                    "Hostname": NODES["dc1"],
                    "UUID": "GPU-dc1",
                    "exported_pod": "resnet-lab-0",
                    "exported_namespace": "team-vision",
                    "exported_container": "resnet-lab",
                },
                [(at, float(i % 4)) for i, (at, _) in enumerate(utilisation({}, 0))],
            ),
            # Scraped with honorLabels true: the exporter's own pod/namespace labels name the holder. The
            # one busy minute was 25 h ago, outside the 24 h window.
            (
                "DCGM_FI_DEV_GPU_UTIL",
                {
                    **GPU,
                    **TARGET,
                    "Hostname": NODES["dc2"],
                    "UUID": "GPU-dc2",
                    "pod": "llm-scratch-0",
                    "namespace": "team-nlp",
                    "container": "llm-scratch",
                },
                utilisation({25 * 60: 40.0}, 4.0),
            ),
            (
                "DCGM_FI_DEV_GPU_UTIL",
                {
                    **GPU,
                    **TARGET,
                    **exporter_pod,
                    "Hostname": NODES["dc3"],
                    "UUID": "GPU-dc3",
                    "exported_pod": "lr-sweep-8h6k2nqz-kzxz9",
                    "exported_namespace": "katib-sweeps",
                    "exported_container": "training",
                },
                utilisation({}, 98.0),
            ),
        ]
    )


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    promtool, prometheus = require("promtool"), require("prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    data = backfill(promtool, series(), directory)
    with running_prometheus(prometheus, data, directory) as url:
        yield url


def claims_json(tmp_path: Path, url: str) -> dict[str, Any]:
    path = tmp_path / "notebooks.json"
    path.write_text(json.dumps(dump(notebooks())), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["claims", "--from", str(path), "--now", NOW_TEXT, "--prometheus", url, "-o", "json"], out=out, err=err)
    assert code == 0, err.getvalue()
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def flags(document: dict[str, Any]) -> dict[str, list[str]]:
    return {h["pod"]: h["flags"] for h in document["holders"]}


def test_a_notebook_whose_card_never_passed_5_percent_in_24_hours_is_flagged_idle(
    tmp_path: Path, prometheus_url: str
) -> None:
    assert flags(claims_json(tmp_path, prometheus_url))["resnet-lab-0"] == ["low-cpu", "long-held", "idle"]


def test_the_holder_is_read_from_the_plain_pod_labels_too_and_a_spike_outside_the_window_does_not_count(
    tmp_path: Path, prometheus_url: str
) -> None:
    assert flags(claims_json(tmp_path, prometheus_url))["llm-scratch-0"] == ["terminating", "long-held", "idle"]


def test_a_trial_driving_its_card_at_98_percent_is_not_idle(tmp_path: Path, prometheus_url: str) -> None:
    assert flags(claims_json(tmp_path, prometheus_url))["lr-sweep-8h6k2nqz-kzxz9"] == []


def test_without_prometheus_nobody_is_flagged_idle(tmp_path: Path) -> None:
    path = tmp_path / "notebooks.json"
    path.write_text(json.dumps(dump(notebooks())), encoding="utf-8")
    out = io.StringIO()

    assert main(["claims", "--from", str(path), "--now", NOW_TEXT, "-o", "json"], out=out) == 0
    assert not any("idle" in f for f in flags(json.loads(out.getvalue())).values())
