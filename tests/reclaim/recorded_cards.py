"""A real Prometheus (Debian's package) holding what a lab's would for the reclaim policy: dcgm-exporter's utilisation
series per card, as Prometheus stores them behind the operator's ServiceMonitor (`exported_*` pod labels), backfilled
with promtool, and the per-card recording rules' output (components/gpu_platform/card_rules.py) backfilled from them
with `promtool tsdb create-blocks-from rules`: the rules themselves record the series the policy reads.

Shared by `claims --reclaimable`'s tests and the e2e module of the policy.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from components.gpu_platform.card_rules import build_card_group
from tests.day2.prometheus_server import backfill, openmetrics, running_prometheus

EXPORTER = {
    "job": "nvidia-dcgm-exporter",
    "instance": "10.42.1.7:9400",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-bqh48",
    "service": "nvidia-dcgm-exporter",
    "container": "nvidia-dcgm-exporter",
    "modelName": "NVIDIA RTX A1000",
}


@dataclass(frozen=True)
class RecordedCard:
    """One card's utilisation from `start` to `end` at one sample a minute, naming `holder` (namespace, pod) or no
    pod; `busy_from`: the utilisation is `busy` from then on, else `percent` throughout."""

    node: str
    percent: float
    holder: tuple[str, str] | None
    start: datetime
    end: datetime
    gpu: str = "0"
    busy_from: datetime | None = None
    busy: float = 80.0

    def series(self) -> tuple[str, dict[str, str], list[tuple[datetime, float]]]:
        labels = {**EXPORTER, "Hostname": self.node, "gpu": self.gpu, "UUID": f"GPU-{self.node}-{self.gpu}"}
        if self.holder is not None:
            labels.update(exported_namespace=self.holder[0], exported_pod=self.holder[1], exported_container="main")
        count = int((self.end - self.start).total_seconds() // 60)
        times = [self.start + timedelta(minutes=i) for i in range(count + 1)]
        samples = [(t, self.busy if self.busy_from and t >= self.busy_from else self.percent) for t in times]
        return ("DCGM_FI_DEV_GPU_UTIL", labels, samples)


def _backfill_rules(promtool: str, url: str, start: datetime, end: datetime, directory: Path) -> Path:
    path = directory / "card-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [build_card_group()]}, sort_keys=False), encoding="utf-8")
    output = directory / "card-blocks"
    subprocess.run(
        [
            promtool, "tsdb", "create-blocks-from", "rules",
            f"--start={start.timestamp():.0f}", f"--end={end.timestamp():.0f}",
            f"--url={url}", f"--output-dir={output}", str(path),
        ],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return output


@contextmanager
def prometheus_with_cards(
    promtool: str,
    prometheus: str,
    cards: Sequence[RecordedCard],
    rules_from: datetime,
    rules_to: datetime,
    directory: Path,
    config_text: str | None = None,
) -> Iterator[str]:
    """Prometheus serving the cards' raw series and the card rules recorded from `rules_from` to `rules_to` (as if the
    rule had been loaded then); yields its URL. `config_text`: what it scrapes and evaluates meanwhile."""
    data = backfill(promtool, openmetrics([card.series() for card in cards]), directory)
    with running_prometheus(prometheus, data, directory) as url:
        blocks = _backfill_rules(promtool, url, rules_from, rules_to, directory)
    for block in blocks.iterdir():
        if block.is_dir():
            shutil.move(str(block), str(data / block.name))
    with running_prometheus(prometheus, data, directory, config_text) as url:
        yield url


def rules_file(directory: Path, rules: dict[str, Any]) -> Path:
    path = directory / "alert-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rules["spec"]["groups"]}, sort_keys=False), encoding="utf-8")
    return path
