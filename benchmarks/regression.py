"""Held ratios (issue 42): `make bench` compares each ratio it measured with the value BENCHMARKS.md records and
reports one more than 10% above it, or more than the run's own run-to-run spread where that is larger, as a
regression naming the case. Ratios only: both sides of a ratio ran interleaved in the same run, so load from other
work falls on both; a time alone would say more about the machine than about the program.

BENCHMARKS.md records the ratios in one table under `HELD_HEADING`, a row per case (`| case | ratio | spread |`),
which this module writes and reads back: the file is the baseline, `make bench-update` moves it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HELD_HEADING = "### Ratios `make bench` holds"
TOLERANCE = 0.10
_ROW = re.compile(r"^\| (?P<case>[^|]+?) \| (?P<ratio>\d+(?:\.\d+)?)x \| (?P<spread>\d+(?:\.\d+)?)% \|$")


@dataclass(frozen=True)
class Ratio:
    case: str
    value: float
    # The run-to-run spread of the ratio: the range of the per-turn ratios over their median (0.05: 5%).
    spread: float


def ratio_of_turns(case: str, numerators: Sequence[float], denominators: Sequence[float]) -> Ratio:
    """The ratio of the medians, with the spread of the ratios turn by turn (each turn ran both, one after other)."""
    turns = [a / b for a, b in zip(numerators, denominators, strict=True)]
    value = statistics.median(numerators) / statistics.median(denominators)
    spread = (max(turns) - min(turns)) / statistics.median(turns) if len(turns) > 1 else 0.0
    return Ratio(case, value, spread)


def render_held(ratios: Sequence[Ratio]) -> list[str]:
    rows = [f"| {r.case} | {r.value:.2f}x | {r.spread * 100:.0f}% |" for r in ratios]
    return [HELD_HEADING, "", "| case | ratio | spread |", "|---|---|---|", *rows]


def read_held(text: str) -> dict[str, float]:
    """case -> ratio, from the held table of a BENCHMARKS.md (empty when it has none: nothing to compare yet)."""
    held: dict[str, float] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("#"):
            inside = line.strip() == HELD_HEADING
            continue
        match = _ROW.match(line.strip()) if inside else None
        if match:
            held[match["case"]] = float(match["ratio"])
    return held


def regressions(recorded: Mapping[str, float], measured: Sequence[Ratio], tolerance: float = TOLERANCE) -> list[str]:
    """One message per measured ratio above its recorded value by more than `tolerance` or its own spread,
    whichever is larger; a case BENCHMARKS.md does not record yet is not compared."""
    found = []
    for ratio in measured:
        before = recorded.get(ratio.case)
        if before is None or before <= 0:
            continue
        allowed = max(tolerance, ratio.spread)
        if ratio.value > before * (1 + allowed):
            found.append(
                f"regression: {ratio.case}: {ratio.value:.2f}x, BENCHMARKS.md holds {before:.2f}x "
                f"(+{(ratio.value / before - 1) * 100:.0f}%; allowed +{allowed * 100:.0f}%: "
                f"{tolerance * 100:.0f}% or this run's spread of {ratio.spread * 100:.0f}%, whichever is larger)"
            )
    return found
