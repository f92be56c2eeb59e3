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
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchmarks.cases import Case, Measurement, discover_sdk_modules, generated_case, measure, run_once
from benchmarks.child import run_child
from benchmarks.cold_setup import cold_setup
from benchmarks.engine_case import EngineRow, measure_engine
from benchmarks.engine_scale import ScaleResult, measure_engine_scale
from benchmarks.engine_scale_report import scale_ratios
from benchmarks.profile_summary import Profile, import_costs, summarise_profile
from benchmarks.regression import Ratio, ratio_of_turns, read_held, regressions
from benchmarks.report import Report, render
from benchmarks.settings import (
    BYTECODE_AS_CONFIGURED,
    DEFAULT_DOMAINS,
    ENGINE_SCALE_DOMAINS,
    MAX_LARGEST_OVER_SMALLEST,
    MAX_LARGEST_RSS_MB,
    MIN_RUNS,
    OUTPUT,
    ROOT,
    SDK_MODULES_ENV,
    BenchError,
)
from benchmarks.suite_timing import time_test_suite


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
    parser.add_argument("--skip-cold", action="store_true", help="do not time make preview/test on a fresh clone")
    parser.add_argument(
        "--e2e-cold", action="store_true", help="also time the e2e tier's cold build (minutes, gigabytes)"
    )
    parser.add_argument("--skip-engine", action="store_true", help="do not measure the real Pulumi engine")
    parser.add_argument(
        "--engine-runs", type=int, default=MIN_RUNS, help=f"real-engine previews per case (default {MIN_RUNS})"
    )
    parser.add_argument(
        "--engine-scale-runs",
        type=int,
        default=MIN_RUNS,
        help=f"turns of the scaled real-engine case (default {MIN_RUNS}; 0 skips it)",
    )
    parser.add_argument(
        "--engine-scale-domains",
        type=_domains,
        default=list(ENGINE_SCALE_DOMAINS),
        help="domain counts of the scaled real-engine case, default 30,100",
    )
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


def held_ratios(engine: EngineRow | None, scaled: ScaleResult | None) -> list[Ratio]:
    held = []
    if engine is not None:
        held.append(ratio_of_turns("real engine, prod (3 domains): prod / floor", engine.prod, engine.floor))
    return held + (scale_ratios(scaled) if scaled is not None else [])


def _real_engine(
    args: argparse.Namespace, work: Path, modules: list[str]
) -> tuple[EngineRow | None, ScaleResult | None]:
    """prod under the real engine against its floors, then the same at scale (issue 42)."""
    if args.skip_engine:
        return None, None
    (work / "engine").mkdir()
    engine = measure_engine(work / "engine", max(args.engine_runs, 3), modules, _log)
    scaled = None
    if args.engine_scale_runs > 0:
        (work / "engine-scale").mkdir()
        scaled = measure_engine_scale(work / "engine-scale", args.engine_scale_domains, args.engine_scale_runs, _log)
    return engine, scaled


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
        engine, scaled_engine = _real_engine(args, work, modules)
        tests = [] if args.skip_tests else time_test_suite(_log)
        cold = [] if args.skip_cold else cold_setup(_log, e2e=args.e2e_cold)
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
        engine=engine,
        engine_scale=scaled_engine,
        held=held_ratios(engine, scaled_engine),
        regressions=[],
        tests=tests,
        cold=cold,
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
    # Against the BENCHMARKS.md this run started from (`bench-update` overwrites it below).
    recorded = read_held(OUTPUT.read_text(encoding="utf-8")) if OUTPUT.exists() else {}
    report = replace(report, regressions=regressions(recorded, report.held))
    text = render(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text, end="")
    for message in report.regressions:
        print(message, file=sys.stderr)
    return 1 if report.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
