"""Where the time of one preview goes: import costs and a cProfile summed by who owns the code."""

from __future__ import annotations

import pstats
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases import Case, child_command, child_env
from benchmarks.settings import ROOT, BenchError

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
