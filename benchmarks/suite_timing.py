"""Timing `make test` and pytest, with the slowest tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.settings import ROOT, without_make_variables


@dataclass(frozen=True)
class Timed:
    label: str
    wall: float
    exit_code: int
    summary: str
    slowest: list[tuple[str, float]] = field(default_factory=list)


SLOWEST_TESTS = 10
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s\s+(call|setup|teardown)\s+(\S+)")


def _durations(output: str) -> list[tuple[str, float]]:
    """pytest's `--durations` lines: (phase and test id, seconds)."""
    found = []
    for line in output.splitlines():
        match = DURATION.match(line.strip())
        if match:
            found.append((f"{match.group(3)} ({match.group(2)})", float(match.group(1))))
    return found


def _summary_line(output: str) -> str:
    lines = [line.strip("= ").strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"\b(passed|failed|error|errors|skipped)\b", line):
            return line
    return lines[-1] if lines else ""


def time_command(label: str, command: list[str], env: dict[str, str] | None = None) -> Timed:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    output = result.stdout + "\n" + result.stderr
    return Timed(label, wall, result.returncode, _summary_line(output), _durations(output))


def time_test_suite(log: Callable[[str], None]) -> list[Timed]:
    make = shutil.which("make")
    timed: list[Timed] = []
    if make is not None:
        # Setup is not part of the suite's time: make the environment once, untimed (a no-op under `make bench`).
        clean = without_make_variables(dict(os.environ))
        subprocess.run(
            [make, "--no-print-directory", ".venv/.synced-dev"], cwd=ROOT, env=clean, capture_output=True, check=False
        )
        log("timing `make test` (lint + pytest)")
        timed.append(time_command("`make test` (lint + pytest)", [make, "--no-print-directory", "test"], clean))
    log("timing pytest alone, in one process, for the slowest tests")
    env = dict(os.environ)
    upstream = ROOT.parent / "shared" / "upstream"
    if "GPU_POOL_UPSTREAM_DIR" not in env and upstream.is_dir():
        env["GPU_POOL_UPSTREAM_DIR"] = str(upstream)  # as the Makefile sets it, so contract tests run too
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--durations={SLOWEST_TESTS}"]
    timed.append(time_command("pytest alone, one process", command, env))
    return timed
