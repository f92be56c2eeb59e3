"""`make e2e` writes the run's slowest tests to a file CI shows (tests/e2e/durations.py, issue 46)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import pytest

from tests.e2e.durations import FILE_ENV, SLOWEST, Durations, start


def report(
    nodeid: str,
    when: Literal["setup", "call", "teardown"],
    seconds: float,
    outcome: Literal["passed", "failed", "skipped"] = "passed",
    worker: str | None = None,
) -> pytest.TestReport:
    done = pytest.TestReport(nodeid, (nodeid, 0, nodeid), {}, outcome, None, when, duration=seconds)
    if worker is not None:
        done.node = SimpleNamespace(gateway=SimpleNamespace(id=worker))  # type: ignore[attr-defined]
    return done


def test_the_slowest_tests_come_first_with_their_phases_worker_and_outcome(tmp_path: Path) -> None:
    durations = Durations(tmp_path / "d.txt")
    durations.record(report("tests/e2e/test_wave.py::test_a", "setup", 170.0, worker="gw1"))
    durations.record(report("tests/e2e/test_wave.py::test_a", "call", 40.0, worker="gw1"))
    durations.record(report("tests/e2e/test_wave.py::test_a", "teardown", 2.0, worker="gw1"))
    durations.record(report("tests/e2e/test_wave.py::test_b", "call", 5.0))
    durations.record(report("tests/e2e/test_up.py::test_c", "setup", 1.0))
    durations.record(report("tests/e2e/test_up.py::test_c", "call", 90.0, "failed"))

    durations.write(2)

    lines = (tmp_path / "d.txt").read_text().splitlines()
    assert lines[0].startswith("3 tests in ") and "on 2 worker(s), 308 s of test time" in lines[0]
    assert "212.0" in lines[1] and "gw1" in lines[1]
    assert "test_a (setup 170.0 call 40.0 teardown 2.0; passed)" in lines[1]
    assert "test_c" in lines[2] and "failed" in lines[2]
    assert "test_b" in lines[3]
    modules = lines[lines.index("by module (s):") + 1 :]
    assert modules == ["   217.0  tests/e2e/test_wave.py", "    91.0  tests/e2e/test_up.py"]


def test_only_the_slowest_thirty_are_listed(tmp_path: Path) -> None:
    durations = Durations(tmp_path / "d.txt")
    for i in range(SLOWEST + 5):
        durations.record(report(f"tests/e2e/test_x.py::test_{i}", "call", float(i)))

    listed = durations.render(1).split("by module")[0].splitlines()[1:]

    assert len(listed) == SLOWEST and "test_34 " in listed[0] and not any("test_4 " in line for line in listed)


def test_only_the_process_that_reports_writes_and_only_when_make_e2e_names_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(FILE_ENV, raising=False)
    assert start(SimpleNamespace()) is None  # type: ignore[arg-type]
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "d.txt"))
    assert start(SimpleNamespace(workerinput={})) is None  # type: ignore[arg-type]
    started = start(SimpleNamespace())  # type: ignore[arg-type]
    assert started is not None and started.path == tmp_path / "d.txt"
