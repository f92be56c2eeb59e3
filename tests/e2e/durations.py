"""Where the e2e tier's time goes: the slowest tests of a run, written to a file CI shows (issue 46).

`make e2e` names the file (`E2E_DURATIONS_FILE`, build/e2e-durations.txt); `.ci/run` prints it after its stage
times. Each test's time is its setup, call and teardown together, as pytest's `--durations` measures each phase:
a session fixture's start is in the setup of the first test that asks for it. Under pytest-xdist the controller
writes it from every worker's reports, each row naming the worker that ran the test, and the modules' totals
follow, so a run shows which modules to split or share before anyone reads a log.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FILE_ENV = "E2E_DURATIONS_FILE"
SLOWEST = 30


@dataclass
class TestTime:
    phases: dict[str, float] = field(default_factory=dict)
    worker: str = "-"
    outcome: str = "passed"

    @property
    def total(self) -> float:
        return sum(self.phases.values())


@dataclass
class Durations:
    """Every test's phases, as reported to this process (the controller's, under xdist); a pytest plugin."""

    path: Path
    started: float = field(default_factory=time.monotonic)
    tests: dict[str, TestTime] = field(default_factory=lambda: defaultdict(TestTime))

    def record(self, report: pytest.TestReport) -> None:
        entry = self.tests[report.nodeid]
        entry.phases[report.when] = entry.phases.get(report.when, 0.0) + report.duration
        node = getattr(report, "node", None)  # xdist's worker, on the controller
        if node is not None:
            entry.worker = str(node.gateway.id)
        if report.failed:
            entry.outcome = "failed"
        elif report.skipped and entry.outcome == "passed":
            entry.outcome = "skipped"

    def render(self, workers: int) -> str:
        wall = time.monotonic() - self.started
        ranked = sorted(self.tests.items(), key=lambda item: item[1].total, reverse=True)
        lines = [
            f"{len(self.tests)} tests in {wall:.0f} s wall on {workers} worker(s), "
            f"{sum(t.total for t in self.tests.values()):.0f} s of test time; the {SLOWEST} slowest "
            "(setup + call + teardown, s):",
        ]
        for nodeid, entry in ranked[:SLOWEST]:
            split = " ".join(f"{when} {entry.phases.get(when, 0.0):.1f}" for when in ("setup", "call", "teardown"))
            lines.append(f"{entry.total:8.1f}  {entry.worker:>4}  {nodeid} ({split}; {entry.outcome})")
        modules: dict[str, float] = defaultdict(float)
        for nodeid, entry in self.tests.items():
            modules[nodeid.split("::", 1)[0]] += entry.total
        lines.append("by module (s):")
        lines += [f"{total:8.1f}  {module}" for module, total in sorted(modules.items(), key=lambda m: -m[1])]
        return "\n".join(lines) + "\n"

    def write(self, workers: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.render(workers))

    # As a plugin (tests/e2e/conftest.py registers it): every phase's report, then the file once the run ends.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.tests:
            self.write(int(getattr(session.config.option, "numprocesses", None) or 1))


def start(config: pytest.Config) -> Durations | None:
    """The recorder, where this process reports (not an xdist worker) and `make e2e` named a file."""
    target = os.environ.get(FILE_ENV)
    if not target or hasattr(config, "workerinput"):
        return None
    return Durations(Path(target))
