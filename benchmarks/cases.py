"""What is measured (cases) and how one case is run and timed in a fresh subprocess."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.settings import BYTECODE_CACHED, ROOT, BenchError


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    mode: str  # "preview" or "baseline"
    stack: str
    stack_dir: Path
    domains: int | None = None
    sharing_profiles: int | None = None
    quota_namespaces: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    unset: tuple[str, ...] = ()
    bytecode: str = BYTECODE_CACHED
    same_as_prod: bool = False  # the generated config is prod's own: measured once, as prod


@dataclass
class Measurement:
    case: Case
    walls: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def rss_mb(self) -> float:
        return statistics.median(self.rss_kib) * 1024 / 1e6

    @property
    def resources(self) -> int:
        return len(self.plan.get("resources") or [])


@dataclass(frozen=True)
class RunResult:
    wall: float
    maxrss_kib: int
    plan: dict[str, Any]
    sdk_modules: list[str]


def child_command(case: Case, out: Path, report: Path, profile: Path | None = None) -> list[str]:
    command = [
        sys.executable, "-m", "benchmarks.run", "--child", case.mode,
        "--stack-dir", str(case.stack_dir), "--stack", case.stack, "--out", str(out), "--report", str(report),
    ]  # fmt: skip
    if profile is not None:
        command += ["--profile", str(profile)]
    return command


def child_env(case: Case) -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in case.unset} | dict(case.env)


def run_once(case: Case, work: Path, profile: Path | None = None) -> RunResult:
    out = work / "out"
    report = work / "report.json"
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    result = subprocess.run(
        child_command(case, out, report, profile),
        cwd=ROOT,
        env=child_env(case),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0 or not report.is_file():
        raise BenchError(f"{case.label}: the run failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    data = json.loads(report.read_text(encoding="utf-8"))
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    return RunResult(wall, int(data["maxrss_kib"]), plan, list(data["sdk_modules"]))


def measure(
    cases: Sequence[Case], work: Path, runs: int, warmups: int, log: Callable[[str], None]
) -> list[Measurement]:
    """Warm-ups, then `runs` rounds over every case (round-robin)."""
    results = {case.key: Measurement(case) for case in cases}
    for case in cases:
        for _ in range(warmups):
            run_once(case, work / case.key)
    for round_number in range(1, runs + 1):
        for case in cases:
            run = run_once(case, work / case.key)
            measurement = results[case.key]
            measurement.walls.append(run.wall)
            measurement.rss_kib.append(run.maxrss_kib)
            measurement.plan = run.plan
        log(f"round {round_number}/{runs} done")
    return [results[case.key] for case in cases]


def generated_case(domains: int, directory: Path) -> Case:
    from benchmarks.stack_generator import PROFILES_KEY, QUOTAS_KEY, generate_stack_config, write_stack_file
    from offline.runner import read_stack_file

    config = generate_stack_config(domains)
    stack = f"scale-{domains}"
    write_stack_file(directory, stack, config)
    quotas = config.get(QUOTAS_KEY)
    return Case(
        key=f"domains-{domains}",
        label=f"{domains} domains",
        mode="preview",
        stack=stack,
        stack_dir=directory,
        domains=domains,
        sharing_profiles=len(config.get(PROFILES_KEY) or {}),
        quota_namespaces=len(quotas.get("namespaces") or {}) if isinstance(quotas, dict) else None,
        same_as_prod=config == read_stack_file("prod", ROOT),
    )


def discover_sdk_modules(prod: Case, work: Path) -> list[str]:
    """The SDK modules a prod preview loads; the baseline imports the same ones (counts as prod's warm-up)."""
    return run_once(prod, work / "discover").sdk_modules
