"""`make bench` (`python -m benchmarks.run`): what a plan costs to preview, how it scales, how deep it is.

Every measured run is a fresh `python -m offline.preview`-equivalent subprocess, so its wall time includes the
interpreter and all imports (what a person typing `make preview` waits for) and its peak RSS is its own: the
child reports `getrusage(RUSAGE_SELF).ru_maxrss` when it is done (RUSAGE_CHILDREN in the driver would give the
maximum over all children, not each one's). Cases run round-robin after one warm-up each, so load from other
work on the machine spreads over all cases instead of skewing one; the table shows medians and the spread.

Bytecode: uv installs the SDKs without .pyc files, and where PYTHONDONTWRITEBYTECODE is set (as in the
project's sandbox) every process compiles pulumi_kubernetes' multi-megabyte sources again, which costs more
than everything else together and hides what the program costs. Measured runs therefore read and write
bytecode in a private PYTHONPYCACHEPREFIX (the warm-ups fill it; the project's .venv is never touched), the
steady state of a normal machine. Prod and the baseline are also run once more as the environment is
configured (no cache), so that cost is on record too.

Writes BENCHMARKS.md at the project root and prints the same text. No timing is asserted anywhere: the
targets are checked here and reported, never in tests.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE_PROGRAM = Path(__file__).resolve().parent / "baseline_program.py"
OUTPUT = ROOT / "BENCHMARKS.md"
SDK_MODULES_ENV = "GPU_POOL_BENCH_SDK_MODULES"
# The SDKs the baseline may import: Pulumi and its provider SDKs, and pydantic (the config models' engine).
SDK_MODULE = re.compile(r"^(pulumi|pydantic)(_[a-z0-9]+)*(\.|$)")
SDK_DISTRIBUTIONS = ("pulumi", "pulumi-kubernetes", "pulumi-proxmoxve", "pulumi-command", "pydantic")
DEFAULT_DOMAINS = (3, 30, 100)
BYTECODE_CACHED = "cached"
BYTECODE_AS_CONFIGURED = "as configured"
MIN_RUNS = 5

# The targets, measured on the project's 2-core machine.
MAX_PROD_OVER_BASELINE = 2.0
MAX_LARGEST_OVER_SMALLEST = 15.0
MAX_LARGEST_RSS_MB = 400.0
MAX_TEST_SUITE_S = 60.0


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------- child process


def _sdk_modules() -> list[str]:
    return sorted(name for name in sys.modules if SDK_MODULE.match(name))


class AllThreadsProfile:
    """cProfile of the main thread and of every thread started while it runs.

    Under the mock monitor the SDK runs RegisterResource in executor threads, and Python 3.11's cProfile only
    sees the thread that enabled it: without this, the SDK's per-resource work would be invisible. (From 3.12
    cProfile is built on sys.monitoring and already covers every thread.)
    """

    def __init__(self) -> None:
        import cProfile

        self._new = cProfile.Profile
        self.main = cProfile.Profile()
        self.threads: list[cProfile.Profile] = []

    def _thread_started(self, frame: Any, event: str, arg: Any) -> None:
        profile = self._new()
        self.threads.append(profile)
        profile.enable()  # replaces this hook for the new thread

    def start(self) -> None:
        import threading

        if sys.version_info < (3, 12):
            threading.setprofile(self._thread_started)
        self.main.enable()

    def stop(self, path: Path) -> None:
        import threading

        self.main.disable()
        threading.setprofile(None)
        stats = pstats.Stats(self.main)
        for profile in self.threads:
            stats.add(profile)
        stats.dump_stats(str(path))


def run_child(args: argparse.Namespace) -> int:
    """One measured run: the preview (or the baseline through the same runner), then its own peak RSS."""
    profiler = AllThreadsProfile() if args.profile else None
    if profiler is not None:
        profiler.start()
    if args.child == "preview":
        from offline.preview import main as preview_main

        command = ["--stack-dir", str(args.stack_dir), "--stack", args.stack, "--out", str(args.out), "--quiet"]
        code = preview_main(command)
    else:
        # What offline/preview.py does, with the baseline program in place of __main__.py.
        from offline.render import write_all
        from offline.runner import PROJECT, read_stack_file, run_stack

        config = read_stack_file(args.stack, args.stack_dir)
        recording = run_stack(args.stack, config=config, secrets={}, program=BASELINE_PROGRAM)
        write_all(recording, args.out, PROJECT, args.stack, [])
        code = 0
    if profiler is not None:
        profiler.stop(args.profile)
    report = {
        "exit": code,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "sdk_modules": _sdk_modules(),
    }
    args.report.write_text(json.dumps(report), encoding="utf-8")
    return int(code)


# ---------------------------------------------------------------------------------------------- cases and runs


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


# ---------------------------------------------------------------------------------------------- what to measure


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


# ---------------------------------------------------------------------------------------------- test suite


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
        subprocess.run([make, "--no-print-directory", ".venv/.synced"], cwd=ROOT, capture_output=True, check=False)
        log("timing `make test` (lint + pytest)")
        timed.append(time_command("`make test` (lint + pytest)", [make, "--no-print-directory", "test"]))
    log("timing pytest alone")
    env = dict(os.environ)
    upstream = ROOT.parent / "shared" / "upstream"
    if "GPU_POOL_UPSTREAM_DIR" not in env and upstream.is_dir():
        env["GPU_POOL_UPSTREAM_DIR"] = str(upstream)  # as the Makefile sets it, so contract tests run too
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--durations={SLOWEST_TESTS}"]
    timed.append(time_command("pytest alone", command, env))
    return timed


# ---------------------------------------------------------------------------------------------- where time goes


STDLIB = "Python (stdlib, asyncio, builtins)"
MAX_CHARGE_DEPTH = 60
WAITING = "waiting: idle executor threads, lock and GIL waits, event-loop poll and wake-ups (excluded from shares)"
OURS = "gpu-pool (config/, components/, offline/, __main__.py)"
# Builtins whose self time is a thread blocked (on a queue, a lock, the GIL, the event loop's selector), not work.
WAIT_FUNCTION = re.compile(
    r"(\bpoll\b|\bselect\b|'acquire' of|'__enter__' of '_thread|'get' of '_queue|'send' of '_socket|\bsleep\b)"
)
YAML_ENTRY_POINTS = {"dump", "safe_dump", "dump_all", "load", "safe_load", "load_all", "safe_load_all"}


def _bucket(key: tuple[str, int, str]) -> str:
    file_name, _, function = key
    if file_name == "~" and WAIT_FUNCTION.search(function):
        return WAITING
    path = file_name.replace("\\", "/")
    if "/site-packages/" in path:
        package = path.split("/site-packages/", 1)[1].split("/", 1)[0]
        if package.startswith("pulumi"):
            return "Pulumi SDKs (pulumi, pulumi_kubernetes, pulumi_proxmoxve, pulumi_command)"
        if package.startswith("pydantic"):
            return "pydantic"
        if package in {"google", "grpc"}:
            return "protobuf / grpc (the SDK's wire format)"
        if package in {"yaml", "_yaml"}:
            return "PyYAML (pure-Python emitter/parser, called by our code)"
        return "other third-party packages"
    if path.startswith(str(ROOT)) and "/.venv/" not in path:
        return OURS
    if path.startswith("<frozen importlib") or path.startswith("<frozen zipimport"):
        return "Python import system (finding, loading, unmarshalling modules)"
    return STDLIB


def _charged_to_callers(raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]) -> dict[str, float]:
    """Self time per bucket, with stdlib time charged to the nearest non-stdlib caller.

    The event loop, futures and typing run on someone's behalf; each stdlib function's self time is split
    over its callers by their share of its cumulative time, walking up until a caller is not stdlib.
    """
    memo: dict[tuple[str, int, str], dict[str, float]] = {}

    def shares(key: tuple[str, int, str], path: frozenset[tuple[str, int, str]]) -> dict[str, float]:
        bucket = _bucket(key)
        if bucket != STDLIB:
            return {bucket: 1.0}
        if key in memo:
            return memo[key]
        callers = {caller: edge[3] for caller, edge in raw[key][4].items() if caller in raw and caller not in path}
        total = sum(callers.values())
        result: dict[str, float] = {}
        if total <= 0 or len(path) > MAX_CHARGE_DEPTH:
            result = {STDLIB: 1.0}
        else:
            for caller, cumulative in callers.items():
                for name, fraction in shares(caller, path | {key}).items():
                    result[name] = result.get(name, 0.0) + fraction * cumulative / total
        memo[key] = result
        return result

    charged: dict[str, float] = {}
    for key, (_, _, self_time, _, _) in raw.items():
        for name, fraction in shares(key, frozenset()).items():
            charged[name] = charged.get(name, 0.0) + self_time * fraction
    return charged


@dataclass(frozen=True)
class Profile:
    label: str
    total: float
    buckets: list[tuple[str, float]]
    top_self: list[tuple[str, float]]
    ours_cumulative: list[tuple[str, float]]
    our_yaml_calls: list[tuple[str, float]]
    charged: dict[str, float]


def _where(key: tuple[str, int, str]) -> str:
    file_name, line, function = key
    path = file_name.replace("\\", "/")
    if "/site-packages/" in path:
        path = path.split("/site-packages/", 1)[1]
    elif path.startswith(str(ROOT)):
        path = path[len(str(ROOT)) + 1 :]
    return f"{function} ({path}:{line})" if line else function


def summarise_profile(label: str, path: Path) -> Profile:
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    buckets: dict[str, float] = {}
    for key, (_, _, self_time, _, _) in raw.items():
        buckets[_bucket(key)] = buckets.get(_bucket(key), 0.0) + self_time
    total = sum(seconds for name, seconds in buckets.items() if name != WAITING)
    working = [(k, v) for k, v in raw.items() if _bucket(k) != WAITING]
    top_self = sorted(((_where(k), v[2]) for k, v in working), key=lambda item: -item[1])[:12]
    ours = [(_where(k), v[3]) for k, v in raw.items() if _bucket(k) == OURS and k[2] != "<module>"]
    ours_cumulative = sorted(ours, key=lambda item: -item[1])[:15]
    # Which of our functions call PyYAML, and how long those calls take (cumulative, callee side).
    yaml_calls: dict[str, float] = {}
    for key, (_, _, _, _, callers) in raw.items():
        if key[0].replace("\\", "/").endswith("/yaml/__init__.py") and key[2] in YAML_ENTRY_POINTS:
            for caller, (_, _, _, cumulative) in callers.items():
                if _bucket(caller) == OURS:
                    yaml_calls[_where(caller)] = yaml_calls.get(_where(caller), 0.0) + cumulative
    buckets_sorted = sorted(buckets.items(), key=lambda item: (item[0] == WAITING, -item[1]))
    our_yaml = sorted(yaml_calls.items(), key=lambda item: -item[1])
    return Profile(label, total, buckets_sorted, top_self, ours_cumulative, our_yaml, _charged_to_callers(raw))


def import_costs(case: Case, work: Path) -> list[tuple[str, float]]:
    """Self import time per top-level package (`python -X importtime`), largest first."""
    out = work / "importtime"
    report = work / "importtime.json"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *child_command(case, out, report)[1:]],
        cwd=ROOT, env=child_env(case), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise BenchError(f"import timing of {case.label} failed:\n{result.stderr[-3000:]}")
    per_package: dict[str, float] = {}
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+)\s+\|\s+\d+\s+\|\s+(\S.*)$", line)
        if not match:
            continue
        package = match.group(2).strip().split(".", 1)[0]
        per_package[package] = per_package.get(package, 0.0) + int(match.group(1)) / 1e6
    return sorted(per_package.items(), key=lambda item: -item[1])


# ---------------------------------------------------------------------------------------------- report


def machine() -> list[tuple[str, str]]:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        models = [
            line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
        ]
        cpu = models[0] if models else cpu
    memory = "unknown"
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = []
    for distribution in SDK_DISTRIBUTIONS:
        try:
            versions.append(f"{distribution} {metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{distribution} (not installed)")
    return [
        ("CPU", cpu),
        ("cores", f"{os.cpu_count()} logical, {usable} usable by this process"),
        ("memory", memory),
        ("OS", platform.platform()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("SDKs", ", ".join(versions)),
        ("bytecode as configured", bytecode_setting()),
    ]


def bytecode_setting() -> str:
    """Whether this environment caches compiled SDK modules at all (see the module docstring)."""
    spec = importlib.util.find_spec("pulumi_kubernetes")
    cached = "unknown"
    if spec is not None and spec.origin:
        package = Path(spec.origin).parent
        cached = "yes" if any(package.glob("**/__pycache__/*.pyc")) else "no"
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE") or "unset"
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or "unset"
    return f"PYTHONDONTWRITEBYTECODE={flag}, PYTHONPYCACHEPREFIX={prefix}, .pyc files in the installed SDK: {cached}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _spread(m: Measurement) -> str:
    return f"{min(m.walls):.2f}-{max(m.walls):.2f}"


@dataclass(frozen=True)
class Report:
    runs: int
    warmups: int
    baseline_packages: Measurement
    baseline: Measurement
    prod: Measurement
    scale: list[Measurement]
    uncached: list[Measurement]
    tests: list[Timed]
    profiles: list[Profile]
    imports: list[tuple[str, list[tuple[str, float]]]]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    started: str
    duration: float


def _check(met: bool) -> str:
    return "met" if met else "**missed**"


def render(report: Report) -> str:
    from offline.critical_path import critical_path, critical_path_length, critical_path_shape

    base = report.baseline.wall
    smallest, largest = report.scale[0], report.scale[-1]
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m benchmarks.run`); rerun it to refresh this file. Each case is a fresh",
        "subprocess running the offline preview (`python -m offline.preview --stack-dir DIR --stack NAME --quiet`):",
        f"{report.warmups} warm-up run, then the median of {report.runs} runs (cases interleaved round-robin).",
        "Wall time includes interpreter start and every import; peak RSS is each run's own `ru_maxrss`.",
        "",
        "## Machine",
        "",
        *_table(["", ""], machine()),
        "",
        f"Run started {report.started}, took {report.duration:.0f} s. Load average (1, 5, 15 min): "
        f"{'/'.join(f'{x:.2f}' for x in report.load_before)} before, "
        f"{'/'.join(f'{x:.2f}' for x in report.load_after)} after; other work on the machine shows up in the spread.",
        "",
        "## Cost of a plan",
        "",
        "The baseline runs `benchmarks/baseline_program.py` through the same offline runner (mocks, config,",
        "stack resource, plan files): it imports the SDK modules a prod preview loads and registers nothing.",
        "The packages-only baseline imports just the top-level packages (the SDKs load submodules lazily).",
        "",
    ]
    plan_rows = []
    uncached_base = report.uncached[0].wall if report.uncached else 0.0
    for m in (report.baseline_packages, report.baseline, report.prod, *report.uncached):
        floor = base if m.case.bytecode == BYTECODE_CACHED else uncached_base
        plan_rows.append(
            [
                m.case.label,
                m.case.bytecode,
                str(len(m.walls)),
                str(m.resources),
                f"{m.wall:.2f}",
                _spread(m),
                f"{m.rss_mb:.0f}",
                f"{m.wall / floor:.2f}",
            ]
        )
    lines += _table(
        ["case", "bytecode", "runs", "resources", "median wall (s)", "min-max (s)", "peak RSS (MB)", "x baseline"],
        plan_rows,
    )
    own = report.prod.wall - base
    lines += [
        "",
        "`cached`: bytecode in a private PYTHONPYCACHEPREFIX, filled by the warm-up (a normal machine's steady",
        "state). `as configured`: this environment's own setting (see Machine), no warm-up needed; the ratio",
        "is then against the baseline run the same way.",
        "",
        f"What prod itself costs above the floor: {own:.2f} s for {report.prod.resources} resources (validating",
        "the config, importing our modules and the libraries only they use, building and registering the",
        "resources, writing plan.json, manifests and graph).",
    ]
    lines += [
        "",
        "## Scale",
        "",
        "Generated stacks (`benchmarks/stack_generator.py`): prod's domains repeated on distinct Proxmox nodes with",
        "distinct VM ids, hostnames and subnets; one more sharing profile per ten domains; where the stack has",
        "`gpu-pool:gpuQuotas`, one more quota namespace per domain. A generated stack equal to prod's own config",
        "(3 domains) is not measured twice: its row is prod's measurement.",
        "Marginal time is the time above the baseline, per registered resource.",
        "",
    ]
    scale_rows = []
    for m in report.scale:
        marginal = (m.wall - base) / m.resources * 1000 if m.resources else 0.0
        scale_rows.append(
            [
                f"{m.case.domains} (prod)" if m.case.same_as_prod else str(m.case.domains),
                str(m.case.sharing_profiles),
                "-" if m.case.quota_namespaces is None else str(m.case.quota_namespaces),
                str(m.resources),
                f"{m.wall:.2f}",
                _spread(m),
                f"{m.rss_mb:.0f}",
                f"{m.wall / m.resources * 1000:.1f}" if m.resources else "-",
                f"{marginal:.1f}",
                str(critical_path_length(m.plan)),
            ]
        )
    lines += _table(
        [
            "domains", "sharing profiles", "quota namespaces", "resources", "median wall (s)", "min-max (s)",
            "peak RSS (MB)", "ms / resource", "marginal ms / resource", "critical path",
        ],
        scale_rows,
    )  # fmt: skip
    ratio = largest.wall / smallest.wall
    lines += [
        "",
        f"{largest.case.domains}-domain / {smallest.case.domains}-domain time: **{ratio:.2f}x** for "
        f"{largest.resources / max(smallest.resources, 1):.1f}x the resources.",
        "",
        "## Critical path",
        "",
        "The longest chain of custom resources Pulumi must create one after another (`offline/critical_path.py`:",
        "dependsOn and parent edges as the SDK awaits them, through components, providers left out).",
        "Domains are independent when the chain does not grow with the number of domains.",
        "",
    ]
    path_rows = []
    for m in [report.prod, *report.scale]:
        path_rows.append(
            [
                m.case.label,
                str(critical_path_length(m.plan)),
                " -> ".join(f"`{name}`" for name in critical_path(m.plan)),
                " -> ".join(critical_path_shape(m.plan)),
            ]
        )
    lines += _table(["stack", "length", "chain", "types"], path_rows)
    same_path = all(critical_path_shape(m.plan) == critical_path_shape(smallest.plan) for m in report.scale)
    test_rows = [[t.label, f"{t.wall:.1f}", str(t.exit_code), t.summary] for t in report.tests]
    lines += ["", "## Test suite", ""]
    if test_rows:
        lines += [
            "Environment setup (`uv sync`) excluded: `.venv/.synced` was brought up to date before timing. Run as",
            "the environment is configured (bytecode setting in Machine), as a developer would run it.",
            "",
            *_table(["command", "wall (s)", "exit", "result"], test_rows),
        ]
        if report.uncached:
            compile_cost = report.uncached[-1].wall - report.prod.wall
            lines += [
                "",
                f"With bytecode as configured here, every Python process recompiles the SDK sources it imports: "
                f"{compile_cost:.1f} s per",
                "process (prod as configured minus prod cached, above). The suite runs in one process plus one per",
                "test that starts `python -m offline.preview` itself.",
            ]
        slowest = next((t.slowest for t in report.tests if t.slowest), [])
        if slowest:
            lines += ["", f"Slowest tests (pytest `--durations={SLOWEST_TESTS}`):", ""]
            lines += _table(["test", "s"], [[f"`{name}`", f"{seconds:.2f}"] for name, seconds in slowest])
    else:
        lines.append("Not measured in this run (`--skip-tests`).")
    make_test = next((t for t in report.tests if t.label.startswith("`make test`")), None)
    prod_ratio = report.prod.wall / base
    targets = [
        ["prod preview <= 2x baseline", f"{prod_ratio:.2f}x", _check(prod_ratio <= MAX_PROD_OVER_BASELINE)],
        [
            f"{largest.case.domains} domains <= 15x {smallest.case.domains}-domain time",
            f"{ratio:.2f}x",
            _check(ratio <= MAX_LARGEST_OVER_SMALLEST),
        ],
        [
            f"{largest.case.domains} domains under 400 MB peak",
            f"{largest.rss_mb:.0f} MB",
            _check(largest.rss_mb < MAX_LARGEST_RSS_MB),
        ],
        [
            "critical path identical for all domain counts",
            ", ".join(str(critical_path_length(m.plan)) for m in report.scale),
            _check(same_path),
        ],
    ]
    if make_test is not None:
        passed = make_test.exit_code == 0 and make_test.wall < MAX_TEST_SUITE_S
        measured = f"{make_test.wall:.1f} s" + ("" if make_test.exit_code == 0 else f" (exit {make_test.exit_code})")
        targets.append(["test suite under 60 s", measured, _check(passed)])
    lines += ["", "## Targets", "", *_table(["target", "measured", "status"], targets)]
    lines += render_profiles(report)
    return "\n".join(lines) + "\n"


def render_profiles(report: Report) -> list[str]:
    if not report.profiles and not report.imports:
        return []
    lines = [
        "",
        "## Where the time goes",
        "",
        "Import time per top-level package (`python -X importtime`, self time of every module, one run), then a",
        "cProfile of one run by where the code lives: self time summed over the main thread and the SDK's",
        "executor threads (where the mock monitor's RegisterResource runs), so it is CPU time, not wall time, and",
        "the profiler roughly doubles it; the shares are what counts. Everything under the Pulumi SDKs, pydantic",
        "and protobuf is the SDKs' cost; the gpu-pool rows and our calls into PyYAML are ours to change.",
        "The profiled stack is the largest one when a scale target is missed, otherwise the next size down.",
    ]
    for label, packages in report.imports:
        total = sum(seconds for _, seconds in packages)
        rows = [[name, f"{seconds:.2f}", f"{seconds / total * 100:.0f}%"] for name, seconds in packages[:10]]
        lines += ["", f"### Imports: {label} ({total:.2f} s in all)", "", *_table(["package", "s", "share"], rows)]
    for profile in report.profiles:
        rows = []
        for name, seconds in profile.buckets:
            charged = profile.charged.get(name, 0.0)
            waiting = name == WAITING
            rows.append(
                [
                    name,
                    f"{seconds:.2f}",
                    "-" if waiting else f"{seconds / profile.total * 100:.0f}%",
                    "-" if waiting else f"{charged:.2f}",
                    "-" if waiting else f"{charged / profile.total * 100:.0f}%",
                ]
            )
        lines += ["", f"### Profile: {profile.label} ({profile.total:.2f} s profiled)", ""]
        lines += [
            "The last two columns charge stdlib time (event loop, futures, typing...) to the package whose code",
            "called it, which is the fairer split between our code and the SDKs.",
            "",
        ]
        lines += _table(["where", "self s", "share", "stdlib charged to caller (s)", "share"], rows)
        lines += ["", "Largest self times:", ""]
        lines += _table(["function", "self s"], [[f"`{n}`", f"{s:.3f}"] for n, s in profile.top_self])
        lines += ["", "Our functions by cumulative time (includes the SDK calls they make):", ""]
        lines += _table(["function", "cumulative s"], [[f"`{n}`", f"{s:.3f}"] for n, s in profile.ours_cumulative])
        if profile.our_yaml_calls:
            lines += ["", "Our calls into PyYAML (time inside PyYAML, by calling function):", ""]
            lines += _table(["caller", "s in PyYAML"], [[f"`{n}`", f"{s:.3f}"] for n, s in profile.our_yaml_calls])
    return lines


# ---------------------------------------------------------------------------------------------- driver


def _domains(text: str) -> list[int]:
    values = sorted({int(part) for part in text.split(",") if part.strip()})
    if len(values) < 2 or values[0] < 1:
        raise argparse.ArgumentTypeError("give at least two positive domain counts, e.g. 3,30,100")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=MIN_RUNS, help=f"measured runs per case (default {MIN_RUNS})")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (default 1)")
    parser.add_argument(
        "--domains", type=_domains, default=list(DEFAULT_DOMAINS), help="domain counts, default 3,30,100"
    )
    parser.add_argument(
        "--uncached-runs",
        type=int,
        default=3,
        help="runs of prod and the baseline with bytecode as the environment configures it (default 3, 0 skips)",
    )
    parser.add_argument("--skip-tests", action="store_true", help="do not time the test suite")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile and import breakdown")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the report (BENCHMARKS.md)")
    # Internal: the measured child process.
    parser.add_argument("--child", choices=["preview", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--stack-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stack", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def scale_missed(scale: Sequence[Measurement]) -> bool:
    smallest, largest = scale[0], scale[-1]
    return largest.wall / smallest.wall > MAX_LARGEST_OVER_SMALLEST or largest.rss_mb >= MAX_LARGEST_RSS_MB


def bench(args: argparse.Namespace) -> Report:
    if args.runs < 1 or args.warmup < 0:
        raise BenchError("--runs must be at least 1 and --warmup at least 0")
    if args.runs < MIN_RUNS:
        _log(f"only {args.runs} runs per case: the issue asks for a median of at least {MIN_RUNS}")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    began = time.perf_counter()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gpu-pool-bench-") as temp:
        work = Path(temp)
        stacks = work / "stacks"
        stacks.mkdir()
        pycache = ("PYTHONPYCACHEPREFIX", str(work / "pycache"))
        unset = ("PYTHONDONTWRITEBYTECODE",)
        prod = Case("prod", "prod (Pulumi.prod.yaml)", "preview", "prod", ROOT, env=(pycache,), unset=unset)
        _log("finding the SDK modules a prod preview loads")
        modules = discover_sdk_modules(prod, work)
        listed = (SDK_MODULES_ENV, "\n".join(modules))
        baseline_packages = Case(
            "baseline-packages", "baseline, SDK packages only", "baseline", "prod", ROOT, env=(pycache,), unset=unset
        )
        baseline = Case(
            "baseline", "baseline, prod's SDK modules", "baseline", "prod", ROOT, env=(pycache, listed), unset=unset
        )
        scale = [replace(generated_case(domains, stacks), env=(pycache,), unset=unset) for domains in args.domains]
        cases = [baseline_packages, baseline, prod, *(case for case in scale if not case.same_as_prod)]
        _log(f"{len(cases)} cases, {args.warmup} warm-up + {args.runs} runs each")
        by_key = {m.case.key: m for m in measure(cases, work, args.runs, args.warmup, _log)}
        scaled = [replace(by_key["prod"], case=case) if case.same_as_prod else by_key[case.key] for case in scale]
        uncached: list[Measurement] = []
        if args.uncached_runs > 0:
            as_configured = [
                Case("baseline-uncached", "baseline, prod's SDK modules", "baseline", "prod", ROOT, env=(listed,),
                     bytecode=BYTECODE_AS_CONFIGURED),
                Case("prod-uncached", "prod (Pulumi.prod.yaml)", "preview", "prod", ROOT,
                     bytecode=BYTECODE_AS_CONFIGURED),
            ]  # fmt: skip
            _log(f"{len(as_configured)} cases with bytecode as configured, {args.uncached_runs} runs each")
            uncached = measure(as_configured, work, args.uncached_runs, 0, _log)
        tests = [] if args.skip_tests else time_test_suite(_log)
        profiles: list[Profile] = []
        imports: list[tuple[str, list[tuple[str, float]]]] = []
        if not args.no_profile:
            # Imports are the same at any size: time them on prod. The run itself grows with the stack: profile
            # the largest when a scale target is missed, else the next size down (a third of the time, same shares).
            _log(f"timing the imports of {prod.label}")
            (work / "imports").mkdir()
            imports.append((prod.label, import_costs(prod, work / "imports")))
            target = scale[-1] if scale_missed(scaled) else scale[-2]
            _log(f"profiling {target.label}")
            directory = work / "profile"
            directory.mkdir()
            run_once(target, directory, profile=directory / "profile.out")
            profiles.append(summarise_profile(target.label, directory / "profile.out"))
    return Report(
        runs=args.runs,
        warmups=args.warmup,
        baseline_packages=by_key["baseline-packages"],
        baseline=by_key["baseline"],
        prod=by_key["prod"],
        scale=scaled,
        uncached=uncached,
        tests=tests,
        profiles=profiles,
        imports=imports,
        load_before=load_before,
        load_after=os.getloadavg(),
        started=started,
        duration=time.perf_counter() - began,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        report = bench(args)
    except BenchError as error:
        print(f"bench failed: {error}", file=sys.stderr)
        return 1
    text = render(report)
    args.output.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
