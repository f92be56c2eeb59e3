"""BENCHMARKS.md: the machine, the measurements, the targets and where the time goes."""

from __future__ import annotations

import importlib.util
import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from benchmarks.cases import Measurement
from benchmarks.cold_setup import WARM_TEST, ColdRun
from benchmarks.engine_case import EngineRow, Trace
from benchmarks.engine_scale import ScaleResult
from benchmarks.engine_scale_report import render_engine_scale
from benchmarks.profile_summary import WAITING, Profile
from benchmarks.regression import Ratio, render_held
from benchmarks.settings import (
    BYTECODE_CACHED,
    MAX_COLD_PREVIEW_S,
    MAX_ENGINE_OVER_FLOOR,
    MAX_LARGEST_OVER_SMALLEST,
    MAX_LARGEST_RSS_MB,
    MAX_PROD_OVER_BASELINE,
    MAX_TEST_SUITE_S,
    PREVIEW_ENV,
    SDK_DISTRIBUTIONS,
)
from benchmarks.suite_timing import SLOWEST_TESTS, Timed


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
    engine: EngineRow | None
    tests: list[Timed]
    cold: list[ColdRun]
    profiles: list[Profile]
    imports: list[tuple[str, list[tuple[str, float]]]]
    engine_scale: ScaleResult | None
    # The ratios this run measured that BENCHMARKS.md holds, and the regressions against its recorded values.
    held: list[Ratio]
    regressions: list[str]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    started: str
    duration: float


def _check(met: bool) -> str:
    return "met" if met else "**missed**"


DOMAIN_TYPE = "gpu-pool:proxmox:GpuFailureDomain"


def render(report: Report) -> str:
    """BENCHMARKS.md, section after section."""
    lines = [
        *_render_intro(report),
        *_render_plan_cost(report),
        *_render_scale(report),
        *_render_critical_path(report),
        *render_engine(report.engine),
        *render_engine_scale(report.engine_scale),
        *_render_held(report),
        *_render_test_suite(report),
        *_render_first_contact(report),
        *_render_targets(report),
        *render_profiles(report),
    ]
    return "\n".join(lines) + "\n"


def _render_held(report: Report) -> list[str]:
    if not report.held:
        return []
    lines = [
        "",
        "## Held ratios",
        "",
        "`make bench` reports a ratio more than 10% above the value below, or more than the run-to-run spread of",
        "that ratio (the range of its per-turn values over their median) where that is larger, as a regression",
        "naming the case (`benchmarks/regression.py`); `make bench-update` records the new values.",
        "",
        *render_held(report.held),
    ]
    if report.regressions:
        lines += ["", "Regressions against the BENCHMARKS.md this run started from:", ""]
        lines += [f"- {message}" for message in report.regressions]
    return lines


def _render_intro(report: Report) -> list[str]:
    return [
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
    ]


def _render_plan_cost(report: Report) -> list[str]:
    base = report.baseline.wall
    lines = [
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
    return [
        *lines,
        "",
        "`cached`: bytecode in a private PYTHONPYCACHEPREFIX, filled by the warm-up (a normal machine's steady",
        "state). `as configured`: this environment's own setting (see Machine), no warm-up needed; the ratio",
        "is then against the baseline run the same way.",
        "",
        f"What prod itself costs above the floor: {own:.2f} s for {report.prod.resources} resources (validating",
        "the config, importing our modules and the libraries only they use, building and registering the",
        "resources, writing plan.json, manifests and graph).",
    ]


def _render_scale(report: Report) -> list[str]:
    from offline.critical_path import critical_path_length

    base = report.baseline.wall
    smallest, largest = report.scale[0], report.scale[-1]
    lines = [
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
    return [
        *lines,
        "",
        f"{largest.case.domains}-domain / {smallest.case.domains}-domain time: **{_scale_ratio(report):.2f}x** for "
        f"{largest.resources / max(smallest.resources, 1):.1f}x the resources.",
    ]


def _scale_ratio(report: Report) -> float:
    return report.scale[-1].wall / report.scale[0].wall


def _render_critical_path(report: Report) -> list[str]:
    from benchmarks.wave_case import BUMP, rke2_bump_plan
    from offline.critical_path import critical_path, critical_path_length, critical_path_shape, cross_component_waits

    lines = [
        "",
        "## Critical path",
        "",
        "The longest chain of custom resources Pulumi must create one after another (`offline/critical_path.py`:",
        "dependsOn and parent edges as the SDK awaits them, through components, providers left out).",
        "Domains are independent when the chain does not grow with the number of domains. *Waits across",
        "domains* counts the resources that wait for a resource of another failure domain: none on a first",
        "install; in a day-2 wave (here prod's RKE2 bump as `make diff` plans it) each later domain's first steps",
        "(its SSH login check and its drain) wait for the previous domain's last step, and the chain runs through",
        "every domain in turn.",
        "",
    ]
    wave = rke2_bump_plan()
    path_rows = []
    for label, p in [(m.case.label, m.plan) for m in [report.prod, *report.scale]] + [
        (f"prod, day-2 wave: rke2.version -> {BUMP}", wave)
    ]:
        path_rows.append(
            [
                label,
                str(critical_path_length(p)),
                str(len(cross_component_waits(p, DOMAIN_TYPE))),
                " -> ".join(f"`{name}`" for name in critical_path(p)),
                " -> ".join(critical_path_shape(p)),
            ]
        )
    return lines + _table(["stack", "length", "waits across domains", "chain", "types"], path_rows)


def _render_test_suite(report: Report) -> list[str]:
    test_rows = [[t.label, f"{t.wall:.1f}", str(t.exit_code), t.summary] for t in report.tests]
    lines = ["", "## Test suite", ""]
    if not test_rows:
        return [*lines, "Not measured in this run (`--skip-tests`)."]
    lines += [
        "Environment setup (`uv sync`) excluded: the venv was brought up to date before timing. Run as",
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
    return lines


def _render_first_contact(report: Report) -> list[str]:
    lines = ["", "## First contact: a fresh clone, an empty package cache", ""]
    if not report.cold:
        return [*lines, "Not measured in this run (`--skip-cold`)."]
    return [
        *lines,
        "Each command in a throwaway `git clone` of this commit (no venv, no bytecode) with its own empty uv and",
        "mypy caches, so every package is downloaded, installed and compiled and every module type-checked, except",
        "the row whose caches are warm (this machine's, as CI's once filled; `make lint` keeps mypy's beside uv's,",
        "shared by every clone): `benchmarks/cold_setup.py`. The e2e build also",
        "starts from empty Go caches. `make preview` installs the runtime packages only; `make test` adds the dev",
        "tools. Every contract test runs (the upstream data is this checkout's).",
        "",
        *_table(
            ["command", "wall (s)", "left on disk (Go caches and binaries)"],
            [
                [run.label, f"{run.wall:.1f}", "-" if run.disk_bytes is None else f"{run.disk_bytes / 1e9:.1f} GB"]
                for run in report.cold
            ],
        ),
    ]


def _render_targets(report: Report) -> list[str]:
    from offline.critical_path import critical_path_length, critical_path_shape, cross_component_waits

    smallest, largest = report.scale[0], report.scale[-1]
    ratio = _scale_ratio(report)
    same_path = all(critical_path_shape(m.plan) == critical_path_shape(smallest.plan) for m in report.scale)
    prod_ratio = report.prod.wall / report.baseline.wall
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
            "no wait across domains on a first install",
            ", ".join(str(len(cross_component_waits(m.plan, DOMAIN_TYPE))) for m in report.scale),
            _check(all(not cross_component_waits(m.plan, DOMAIN_TYPE) for m in report.scale)),
        ],
        [
            "critical path identical for all domain counts",
            ", ".join(str(critical_path_length(m.plan)) for m in report.scale),
            _check(same_path),
        ],
    ]
    return ["", "## Targets", "", *_table(["target", "measured", "status"], targets + _time_targets(report))]


def _time_targets(report: Report) -> list[list[str]]:
    """The targets on the test suite, the first contact and the real engine, where this run measured them."""
    targets = []
    make_test = next((t for t in report.tests if t.label.startswith("`make test`")), None)
    if make_test is not None:
        passed = make_test.exit_code == 0 and make_test.wall < MAX_TEST_SUITE_S
        measured = f"{make_test.wall:.1f} s" + ("" if make_test.exit_code == 0 else f" (exit {make_test.exit_code})")
        targets.append(["test suite under 60 s", measured, _check(passed)])
    cold_test = next((run for run in report.cold if run.label == WARM_TEST), None)
    if cold_test is not None:
        met = cold_test.wall <= MAX_TEST_SUITE_S
        targets.append(["cold `make test` (fresh clone, cache warm) <= 60 s", f"{cold_test.wall:.1f} s", _check(met)])
    cold_preview = next((run for run in report.cold if run.label == "cold `make preview`"), None)
    if cold_preview is not None:
        met = cold_preview.wall < MAX_COLD_PREVIEW_S
        targets.append(["cold `make preview` under 20 s", f"{cold_preview.wall:.1f} s", _check(met)])
    if report.engine is not None:
        for how, ratio_engine in (
            ("as `make real-preview` runs it", report.engine.ratio),
            ("with the engine's defaults", report.engine.ratio_defaults),
        ):
            targets.append(
                [
                    f"real engine, {how}: prod preview <= {MAX_ENGINE_OVER_FLOOR}x its floor",
                    f"{ratio_engine:.2f}x",
                    _check(ratio_engine <= MAX_ENGINE_OVER_FLOOR),
                ]
            )
    return targets


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


def _env_words() -> str:
    return ", ".join(f"`{key}={value}`" for key, value in PREVIEW_ENV.items())


def _median_row(label: str, walls: list[float]) -> list[str]:
    return [label, str(len(walls)), f"{statistics.median(walls):.2f}", f"{min(walls):.2f}-{max(walls):.2f}"]


def _rpc_total(trace: Trace, plugin: str) -> tuple[int, float]:
    calls = [v for (who, _), v in trace.rpc.items() if who == plugin]
    return sum(n for n, _ in calls), sum(t for _, t in calls)


def render_engine(row: EngineRow | None) -> list[str]:
    lines = ["", "## The real engine", ""]
    if row is None:
        return [*lines, "Not measured in this run (no engine selected by `make engine-tools`, or `--skip-engine`)."]
    prod, floor = row.traces["prod"], row.traces["floor"]
    sdk_cost = statistics.median(row.floor_sdk) - statistics.median(row.floor)
    own_cost = statistics.median(row.prod) - statistics.median(row.floor_sdk)
    with_modules = statistics.median(row.prod) / statistics.median(row.floor_sdk)
    lines += [
        f"`pulumi preview` under the real engine ({row.engine}, the plugins `make engine-tools` selected), each",
        "stack in a temp project with a file backend (`benchmarks/engine_case.py`). **prod**: this program with",
        "prod's stack file, the v26.7.0 chart on disk and the preflights off (GPU_POOL_OFFLINE=1), against a",
        f"kubeconfig whose cluster does not answer; {row.steps} steps. **floor**: a program that registers the same",
        "three providers with the same settings and nothing else. One warm-up each, then turns (prod, floor, ...),",
        "each preview as `make real-preview` runs it (e2e/preview.env: the engine serializes a preview's snapshot",
        f"once instead of after every step), {_env_words()}, and prod and the floor again with the engine's",
        "defaults.",
        "",
        *_table(
            ["case", "runs", "median wall (s)", "min-max (s)"],
            [
                _median_row("prod", row.prod),
                _median_row("floor", row.floor),
                _median_row("floor, after importing prod's SDK modules", row.floor_sdk),
                _median_row("prod, the engine's defaults", row.prod_defaults),
                _median_row("floor, the engine's defaults", row.floor_defaults),
            ],
        ),
        "",
        f"prod / floor: **{row.ratio:.2f}x** as `make real-preview` runs a preview, **{row.ratio_defaults:.2f}x** with",
        "the engine's defaults (the difference is the engine serializing prod's growing snapshot after each of its",
        "steps, only to discard it: docs/engine.md). Of the difference to the floor, importing the SDK modules prod",
        "uses (the Kubernetes API groups, Helm, command, Proxmox resources, the dashboard SDK) takes",
        f"{sdk_cost:.2f} s; the program's own work and its {row.steps} steps under the engine the other",
        f"{own_cost:.2f} s (prod / floor with those modules: {with_modules:.2f}x).",
        "",
        "Where the time goes, from one more run of each with the engine's gRPC log (PULUMI_DEBUG_GRPC: every call",
        "the engine makes, with its duration): the CLI's own start before it runs the program, the language",
        "host's `Run` (the program: uv's environment check, Python's start and imports, the program's work and",
        "its registrations), within it the time to the first provider's start and the time after the last",
        "provider call until `Run` returns (the program's process ending), and the calls to each provider.",
        "Provider calls overlap the program and each other (the engine runs steps in parallel), so they do not",
        "add up to the wall time.",
        "",
    ]
    plugins = sorted({who for who, _ in prod.rpc} | {who for who, _ in floor.rpc})
    rows = [
        ["wall, traced run", f"{prod.wall:.2f}", f"{floor.wall:.2f}", f"{prod.wall - floor.wall:+.2f}"],
        ["CLI start, before `Run`", f"{prod.before_run:.2f}", f"{floor.before_run:.2f}",
         f"{prod.before_run - floor.before_run:+.2f}"],
        ["`Run`: the program", f"{prod.run:.2f}", f"{floor.run:.2f}", f"{prod.run - floor.run:+.2f}"],
        ["of it, to the first provider's start", f"{prod.to_first_plugin:.2f}", f"{floor.to_first_plugin:.2f}",
         f"{prod.to_first_plugin - floor.to_first_plugin:+.2f}"],
        ["of it, after the last provider call (the program's exit)", f"{prod.after_last_call:.2f}",
         f"{floor.after_last_call:.2f}", f"{prod.after_last_call - floor.after_last_call:+.2f}"],
    ]  # fmt: skip
    for plugin in plugins:
        (pn, pt), (fn, ft) = _rpc_total(prod, plugin), _rpc_total(floor, plugin)
        rows.append([f"calls to {plugin} (count)", f"{pt:.2f} ({pn})", f"{ft:.2f} ({fn})", f"{pt - ft:+.2f}"])
    lines += _table(["", "prod (s)", "floor (s)", "difference (s)"], rows)
    busiest = sorted(prod.rpc.items(), key=lambda item: -item[1][1])[:8]
    lines += ["", "prod's costliest calls:", ""]
    lines += _table(["plugin", "method", "calls", "s"], [[w, m, str(n), f"{t:.2f}"] for (w, m), (n, t) in busiest])
    return lines
