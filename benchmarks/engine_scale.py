"""The scaled real-engine case of `make bench` (issue 42): `pulumi preview` of prod's program at 30 and 100 domains
against two floors at the same size, in the same run (benchmarks/engine_floors.py):

- **prod**: this program with a generated stack (`benchmarks/stack_generator.py`: prod's domains repeated, each
  with its own Proxmox node, address, VM id and hostname), the chart on disk, preflights off, as the real-engine
  row runs prod (benchmarks/engine_case.py);
- **floor (a)**: as many trivial `command.local.Command` resources as prod has custom resources;
- **floor (b)**: prod's resource types and counts with minimal inputs and no dependencies, the same providers.

Every preview runs as `make real-preview` runs one (e2e/preview.env). One warm-up of each project, then turns: in
each turn every size's prod, (b) and (a) once, so load from other work on the machine falls on all of them alike and
the ratios of one turn compare like with like. The per-turn ratios give the run-to-run spread.

Then one more preview of each with PULUMI_DEBUG_GRPC (the engine's log of every gRPC call with its duration) for the
breakdown by RPC kind and by resource type (the provider calls that carry a URN), and the offline preview of the same
stack (in-process mocks) for the bytes of inputs per type and the dependency graph: the SDK's dependencies in all
and the longest chain (`offline/critical_path.py`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.engine_case import Project, _kubeconfig, _stamp, selected_engine, upstream_chart
from benchmarks.engine_floors import (
    FLOOR_FILE,
    FLOOR_PROGRAM,
    commands_floor,
    custom_count,
    dependency_edges,
    input_bytes_by_type,
    types_floor,
)
from benchmarks.settings import PREVIEW_ENV, ROOT, BenchError
from benchmarks.stack_generator import generate_stack_config, write_stack_file
from offline.critical_path import critical_path_length

CASES = ("prod", "types", "commands")
CASE_LABELS = {
    "prod": "prod",
    "types": "floor (b): prod's types and counts, minimal inputs",
    "commands": "floor (a): trivial commands",
}
# Methods whose request names one resource (its URN): the breakdown by resource type.
URN_METHODS = frozenset({"Check", "Diff", "Create", "Read", "Update", "Delete", "CheckConfig"})


@dataclass
class RpcTrace:
    """One traced preview: wall, the program's `Run`, and provider calls by (plugin, method) and by (type, method)."""

    wall: float
    run: float
    by_method: dict[tuple[str, str], tuple[int, float]]
    by_type: dict[tuple[str, str], tuple[int, float]]


@dataclass
class ScaleSize:
    domains: int
    resources: int = 0  # custom resources prod registers (providers and components left out)
    registrations: int = 0  # everything prod registers but its providers
    input_bytes: dict[str, tuple[int, int]] = field(default_factory=dict)
    edges: int = 0
    longest_chain: int = 0
    walls: dict[str, list[float]] = field(default_factory=lambda: {case: [] for case in CASES})
    traces: dict[str, RpcTrace] = field(default_factory=dict)

    def median(self, case: str) -> float:
        return statistics.median(self.walls[case])

    def ratio(self, case: str, floor: str) -> float:
        return self.median(case) / self.median(floor)

    def turn_ratios(self, case: str, floor: str) -> list[float]:
        return [a / b for a, b in zip(self.walls[case], self.walls[floor], strict=True)]


@dataclass
class ScaleResult:
    engine: str
    runs: int
    sizes: list[ScaleSize]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    seconds: float = 0.0


def _type_of(urn: str) -> str:
    parts = urn.split("::")
    return parts[2].rsplit("$", 1)[-1] if len(parts) >= 4 else "?"


def read_rpc_trace(log: Path, wall: float) -> RpcTrace:
    by_method: dict[tuple[str, str], list[float]] = {}
    by_type: dict[tuple[str, str], list[float]] = {}
    run_start = run_end = None
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        method = str(entry.get("method", "?")).rsplit("/", 1)[-1]
        metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        at = _stamp(str(entry.get("timestamp", "0001")))
        if method == "Run" and at is not None:
            if entry.get("progress") == "request_started":
                run_start = at
            else:
                run_end = at
        duration = entry.get("duration")
        if entry.get("progress") != "response_completed" or not duration or metadata.get("mode") != "client":
            continue
        who = str(metadata.get("name") or f"language host ({metadata.get('runtime', '?')})")
        slot = by_method.setdefault((who, method), [0, 0.0])
        slot[0] += 1
        slot[1] += duration / 1e9
        request = entry.get("request")
        if method in URN_METHODS and isinstance(request, dict) and request.get("urn"):
            typed = by_type.setdefault((_type_of(str(request["urn"])), method), [0, 0.0])
            typed[0] += 1
            typed[1] += duration / 1e9
    if run_start is None or run_end is None:
        raise BenchError(f"{log}: no Run of the language host in the engine's gRPC log")
    return RpcTrace(
        wall=wall,
        run=(run_end - run_start).total_seconds(),
        by_method={k: (int(n), float(t)) for k, (n, t) in by_method.items()},
        by_type={k: (int(n), float(t)) for k, (n, t) in by_type.items()},
    )


def offline_plan(config: dict[str, Any], work: Path, name: str) -> dict[str, Any]:
    """prod's plan at this size from the offline preview (the same registrations the engine receives)."""
    write_stack_file(work, name, config)
    out = work / f"{name}-offline"
    done = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack-dir", str(work), "--stack", name, "--out", str(out),
         "--quiet"],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("GPU_POOL_")} | {"GPU_POOL_OFFLINE": "1"},
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchError(f"the offline preview of {name} failed:\n{done.stdout}\n{done.stderr}")
    plan: dict[str, Any] = json.loads((out / "plan.json").read_text())
    return plan


def _projects(
    work: Path, engine: Path, domains: int, chart: Path, kubeconfig: Path, size: ScaleSize
) -> dict[str, Project]:
    config = generate_stack_config(domains)
    config["gpu-pool:kubernetes"] = {"kubeconfig": str(kubeconfig), "context": "bench"}
    config["gpu-pool:gpuOperator"] = {**config["gpu-pool:gpuOperator"], "chart": str(chart)}
    plan = offline_plan(config, work, f"plan{domains}")
    size.resources = custom_count(plan)
    size.registrations = len(types_floor(plan))
    size.input_bytes = input_bytes_by_type(plan)
    size.edges = dependency_edges(plan)
    size.longest_chain = critical_path_length(plan)
    floors = {"types": types_floor(plan), "commands": commands_floor(plan)}
    projects = {"prod": Project(work, f"prod-{domains}", engine, config, floor=False)}
    for case, registrations in floors.items():
        projects[case] = Project(
            work, f"{case}-{domains}", engine, config, floor=True, program=FLOOR_PROGRAM,
            files={FLOOR_FILE: json.dumps(registrations)},
        )  # fmt: skip
    return projects


def measure_engine_scale(work: Path, sizes: list[int], runs: int, log: Callable[[str], None]) -> ScaleResult | None:
    engine = selected_engine()
    if engine is None:
        log("no Pulumi engine built or selected (make engine-tools): the scaled real-engine case is left out")
        return None
    chart = upstream_chart(work, log)
    if chart is None:
        return None
    kubeconfig = _kubeconfig(work / "kubeconfig")
    began = time.perf_counter()
    result = ScaleResult(
        engine=subprocess.run([str(engine / "pulumi"), "version"], capture_output=True, text=True).stdout.strip(),
        runs=runs,
        sizes=[ScaleSize(domains) for domains in sizes],
        load_before=os.getloadavg(),
        load_after=(0.0, 0.0, 0.0),
    )
    projects: dict[int, dict[str, Project]] = {}
    for size in result.sizes:
        log(f"engine scale: setting up prod and its floors at {size.domains} domains")
        projects[size.domains] = _projects(work, engine, size.domains, chart, kubeconfig, size)
        for project in projects[size.domains].values():  # warm-up: the language host's first uv sync, bytecode
            project.preview(PREVIEW_ENV)
    for turn in range(runs):
        for size in result.sizes:
            for case in CASES:
                size.walls[case].append(projects[size.domains][case].preview(PREVIEW_ENV))
            log(
                f"engine scale run {turn + 1}/{runs}, {size.domains} domains: "
                + ", ".join(f"{case} {size.walls[case][-1]:.2f} s" for case in CASES)
                + f" (load {os.getloadavg()[0]:.2f})"
            )
    for size in result.sizes:
        for case in CASES:
            grpc = work / f"{case}-{size.domains}-grpc.json"
            wall = projects[size.domains][case].preview({**PREVIEW_ENV, "PULUMI_DEBUG_GRPC": str(grpc)})
            size.traces[case] = read_rpc_trace(grpc, wall)
            grpc.unlink()
    result.load_after = os.getloadavg()
    result.seconds = time.perf_counter() - began
    return result
