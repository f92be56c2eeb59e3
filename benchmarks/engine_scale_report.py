"""BENCHMARKS.md's section on the scaled real-engine case (benchmarks/engine_scale.py) and the ratios it holds."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.engine_scale import CASE_LABELS, CASES, RpcTrace, ScaleResult, ScaleSize
from benchmarks.regression import Ratio, ratio_of_turns

WALL_HEADERS = ("domains", "case", "runs", "median wall (s)", "min-max (s)", "x floor (b)", "x floor (a)")
GRAPH_HEADERS = ("domains", "registrations", "custom resources", "dependency edges", "longest chain")
BYTES_HEADERS = ("count", "KB", "KB each")
FLOOR_B = "types"
FLOOR_A = "commands"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def scale_ratios(result: ScaleResult) -> list[Ratio]:
    """The ratios `make bench` holds for this case: prod over each floor at each size, and prod's growth from the
    smallest to the largest size over floor (b)'s (the turn's growth ratio, turn by turn)."""
    ratios = []
    for size in result.sizes:
        for floor, name in ((FLOOR_B, "floor (b)"), (FLOOR_A, "floor (a)")):
            ratios.append(
                ratio_of_turns(f"real engine, {size.domains} domains: prod / {name}", size.walls["prod"],
                               size.walls[floor])
            )  # fmt: skip
    if len(result.sizes) > 1:
        small, large = result.sizes[0], result.sizes[-1]
        prod_growth = [b / a for a, b in zip(small.walls["prod"], large.walls["prod"], strict=True)]
        floor_growth = [b / a for a, b in zip(small.walls[FLOOR_B], large.walls[FLOOR_B], strict=True)]
        ratios.append(
            ratio_of_turns(
                f"real engine, growth {small.domains} -> {large.domains} domains: prod / floor (b)",
                prod_growth,
                floor_growth,
            )
        )
    return ratios


def _walls(result: ScaleResult) -> list[list[str]]:
    rows = []
    for size in result.sizes:
        for case in CASES:
            walls = size.walls[case]
            rows.append([
                str(size.domains), CASE_LABELS[case], str(len(walls)), f"{size.median(case):.2f}",
                f"{min(walls):.2f}-{max(walls):.2f}", f"{size.ratio(case, FLOOR_B):.2f}x",
                f"{size.ratio(case, FLOOR_A):.2f}x",
            ])  # fmt: skip
    return rows


def _graph(result: ScaleResult) -> list[list[str]]:
    return [
        [str(s.domains), str(s.registrations), str(s.resources), str(s.edges), str(s.longest_chain)]
        for s in result.sizes
    ]


def _input_bytes(result: ScaleResult) -> list[list[str]]:
    largest = result.sizes[-1].input_bytes
    types = sorted({t for s in result.sizes for t in s.input_bytes}, key=lambda t: -largest.get(t, (0, 0))[1])
    rows = []
    for type_ in types:
        row = [f"`{type_}`"]
        for size in result.sizes:
            count, size_bytes = size.input_bytes.get(type_, (0, 0))
            row += [str(count), f"{size_bytes / 1000:.1f}", f"{size_bytes / 1000 / count:.2f}" if count else "-"]
        rows.append(row)
    return rows


def _by_method(size: ScaleSize) -> list[list[str]]:
    keys = sorted({k for t in size.traces.values() for k in t.by_method}, key=lambda k: -_seconds(size, "prod", k))
    rows = [["language host", "`Run` (the program, start to end)",
             *(f"{size.traces[c].run:.2f}" if c in size.traces else "-" for c in CASES)]]  # fmt: skip
    for plugin, method in keys:
        if method == "Run" or all(_seconds(size, case, (plugin, method)) < 0.005 for case in CASES):
            continue
        rows.append([plugin, method, *(_cell(size.traces.get(case), (plugin, method)) for case in CASES)])
    return rows


def _by_type(size: ScaleSize) -> list[list[str]]:
    keys = {k for t in size.traces.values() for k in t.by_type}
    ordered = sorted(keys, key=lambda k: -(size.traces["prod"].by_type.get(k, (0, 0.0))[1] if "prod" in size.traces
                                            else 0.0))  # fmt: skip
    return [[f"`{type_}`", method, *(_cell(size.traces.get(case), (type_, method), by_type=True) for case in CASES)]
            for type_, method in ordered]  # fmt: skip


def _seconds(size: ScaleSize, case: str, key: tuple[str, str]) -> float:
    trace = size.traces.get(case)
    return trace.by_method.get(key, (0, 0.0))[1] if trace else 0.0


def _cell(trace: RpcTrace | None, key: tuple[str, str], by_type: bool = False) -> str:
    if trace is None:
        return "-"
    calls, seconds = (trace.by_type if by_type else trace.by_method).get(key, (0, 0.0))
    return f"{seconds:.2f} ({calls})" if calls else "-"


def render_engine_scale(result: ScaleResult | None) -> list[str]:
    lines = ["", "## The real engine at scale", ""]
    if result is None:
        return [*lines, "Not measured in this run (no engine selected by `make engine-tools`, or skipped)."]
    sizes = ", ".join(str(s.domains) for s in result.sizes)
    lines += [
        f"`pulumi preview` under the real engine ({result.engine}) at {sizes} domains (`benchmarks/engine_scale.py`):",
        "**prod** is this program with a generated stack (prod's domains repeated, each with its own Proxmox node,",
        "address, VM id and hostname), the chart on disk and the preflights off; **floor (b)** registers prod's",
        "resource types and counts with minimal inputs and no dependencies through the same three providers;",
        "**floor (a)** as many trivial `command.local.Command` resources as prod has custom resources",
        "(`benchmarks/engine_floors.py`). The floors run the Python SDK as it ships. One warm-up each, then",
        f"{result.runs} turns, each running every size's three previews once, as `make real-preview` runs them.",
        f"Load average (1, 5, 15 min) {_load(result.load_before)} before, {_load(result.load_after)} after, on",
        f"this machine's cores shared with other work: the ratios of one run are what counts ({result.seconds:.0f} s).",
        "",
        *_table(WALL_HEADERS, _walls(result)),
        "",
    ]
    if len(result.sizes) > 1:
        small, large = result.sizes[0], result.sizes[-1]
        growth = {case: large.median(case) / small.median(case) for case in CASES}
        lines += [
            f"Growth from {small.domains} to {large.domains} domains ({large.resources / small.resources:.2f}x the "
            f"custom resources): prod {growth['prod']:.2f}x, floor (b) {growth[FLOOR_B]:.2f}x, floor (a) "
            f"{growth[FLOOR_A]:.2f}x; prod's growth over floor (b)'s: **{growth['prod'] / growth[FLOOR_B]:.2f}x**.",
            "",
        ]
    lines += [
        "The dependency graph prod hands the engine (the offline preview of the same stack): registrations (all but",
        "the providers), custom resources, the dependencies the SDK sends with them, and the longest chain of",
        "custom resources created one after another (`offline/critical_path.py`).",
        "",
        *_table(GRAPH_HEADERS, _graph(result)),
        "",
        "Bytes of inputs per resource type (JSON of the registration's inputs, as the offline preview records them):",
        "",
        *_table(["type", *(f"{s.domains}: {h}" for s in result.sizes for h in BYTES_HEADERS)], _input_bytes(result)),
    ]
    for size in result.sizes:
        lines += _render_breakdown(size)
    return lines


def _render_breakdown(size: ScaleSize) -> list[str]:
    return [
        "",
        f"### {size.domains} domains: where the time goes",
        "",
        "One more preview of each with the engine's gRPC log (PULUMI_DEBUG_GRPC; seconds and calls, summed over",
        "calls that overlap one another), by RPC kind:",
        "",
        *_table(["plugin", "method", *(CASE_LABELS[c] for c in CASES)], _by_method(size)),
        "",
        "and by resource type (the provider calls that name a resource):",
        "",
        *_table(["type", "method", *(CASE_LABELS[c] for c in CASES)], _by_type(size)),
    ]
