"""What the commands print: stable JSON (the contract in docs/day2.md) and rich tables for people."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from day2.claims.compute import FLAG_TERMINATING, Claims, Holder, stop_command
from day2.doctor.walk import Diagnosis, fix_as_dict

# Wide enough for a node name, a pod name and the flags side by side when the output is not a terminal.
PIPE_WIDTH = 160


def cores(value: Decimal) -> float:
    return float(round(value, 3))


def claims_json(claims: Claims) -> dict[str, Any]:
    total = claims.total
    return {
        "nodes": [
            {
                "name": n.name,
                "allocatable": n.allocatable,
                "allocated": n.allocated,
                "free": n.free,
                "expected": n.expected,
            }
            for n in claims.nodes
        ],
        "holders": [
            {
                "namespace": h.namespace,
                "pod": h.pod,
                "node": h.node,
                "gpus": h.gpus,
                "cpuRequest": cores(h.cpu_request),
                "ageSeconds": h.age_seconds,
                "phase": h.phase,
                "terminating": h.terminating,
                "owner": {"kind": h.owner.kind, "name": h.owner.name},
                "flags": list(h.flags),
            }
            for h in claims.holders
        ],
        "waiting": [
            {"namespace": w.namespace, "pod": w.pod, "gpus": w.gpus, "reason": w.reason} for w in claims.waiting
        ],
        "total": {"allocatable": total.allocatable, "allocated": total.allocated, "free": total.free},
    }


def diagnosis_json(diagnosis: Diagnosis) -> dict[str, Any]:
    return {
        "node": diagnosis.node,
        "floors": [{"name": f.name, "ok": f.ok, "detail": f.detail} for f in diagnosis.floors],
        "firstBroken": diagnosis.first_broken,
        "fix": fix_as_dict(diagnosis.fix),
    }


def write_json(document: Any, out: TextIO) -> None:
    out.write(json.dumps(document, indent=2, sort_keys=False) + "\n")


@contextmanager
def console(out: TextIO) -> Iterator[Console]:
    """A console for `out`: the terminal's width and colours, or off a terminal a fixed width, no colour codes
    (whatever FORCE_COLOR says) and no trailing blanks, so pipes, files and docs get stable text."""
    if out.isatty():
        yield Console(file=out, highlight=False)
        return
    buffer = io.StringIO()
    yield Console(file=buffer, width=PIPE_WIDTH, force_terminal=False, highlight=False)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def duration(seconds: int) -> str:
    """`105d`, `3h`, `12m`: the largest whole unit, as kubectl shows ages."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _owner(h: Holder) -> str:
    return f"{h.owner.kind}/{h.owner.name}"


def print_claims(claims: Claims, out: TextIO, *, idle_checked: bool = False, time_sliced: bool = False) -> None:
    with console(out) as con:
        _claims_tables(con, claims, idle_checked=idle_checked, time_sliced=time_sliced)


def _claims_tables(con: Console, claims: Claims, *, idle_checked: bool, time_sliced: bool) -> None:
    nodes = Table(title="GPU nodes", box=box.SIMPLE_HEAD, title_justify="left", show_edge=False)
    for column in ("node", "allocatable", "allocated", "free", "expected"):
        nodes.add_column(column, justify="left" if column == "node" else "right")
    for n in claims.nodes:
        nodes.add_row(
            n.name, str(n.allocatable), str(n.allocated), str(n.free), "-" if n.expected is None else str(n.expected)
        )
    total = claims.total
    nodes.add_row("total", str(total.allocatable), str(total.allocated), str(total.free), "", style="bold")
    con.print(nodes)

    holders = Table(title="Holders", box=box.SIMPLE_HEAD, title_justify="left", show_edge=False)
    for column in ("namespace", "pod", "node", "gpus", "cpu", "held", "phase", "owner", "flags"):
        holders.add_column(column, justify="right" if column in ("gpus", "cpu", "held") else "left", no_wrap=True)
    for h in claims.holders:
        phase = f"{h.phase}, Terminating" if h.terminating else h.phase
        holders.add_row(
            h.namespace,
            h.pod,
            h.node,
            str(h.gpus),
            f"{cores(h.cpu_request):g}",
            duration(h.age_seconds),
            phase,
            _owner(h),
            ", ".join(h.flags),
        )
    con.print()
    con.print(holders if claims.holders else "Holders: no pod holds a GPU")

    if claims.waiting:
        waiting = Table(title="Waiting for a GPU", box=box.SIMPLE_HEAD, title_justify="left", show_edge=False)
        for column in ("namespace", "pod", "gpus", "reason"):
            waiting.add_column(column, justify="right" if column == "gpus" else "left")
        for w in claims.waiting:
            waiting.add_row(w.namespace, w.pod, str(w.gpus), w.reason or "-")
        con.print()
        con.print(waiting)

    _print_freeing(con, claims.holders)
    if idle_checked and time_sliced:
        con.print(
            "Note: idle is read from dcgm-exporter, which names only one of the pods sharing a time-sliced card; "
            "a pod sharing a card may show no idle flag, or the card's utilisation caused by another pod."
        )


def _print_freeing(con: Console, holders: Sequence[Holder]) -> None:
    flagged = [h for h in holders if h.flags and FLAG_TERMINATING not in h.flags]
    stopping = [h for h in holders if FLAG_TERMINATING in h.flags]
    if flagged or stopping:
        con.print()
    if flagged:
        con.print("To free a flagged card (the card is back only once the pod is gone):")
        for h in flagged:
            con.print(f"  {h.namespace}/{h.pod} ({_owner(h)}): {stop_command(h)}", soft_wrap=True)
    if stopping:
        con.print("Terminating, still holding (the card is back once the pod is gone):")
    for h in stopping:
        con.print(
            f"  {h.namespace}/{h.pod} ({h.gpus} GPU on {h.node}); if it stays: "
            f"kubectl -n {h.namespace} get pod {h.pod} -o jsonpath='{{.metadata.finalizers}}'",
            soft_wrap=True,
        )


def print_diagnoses(diagnoses: Sequence[Diagnosis], out: TextIO) -> None:
    with console(out) as con:
        _diagnosis_tables(con, diagnoses)


def _diagnosis_tables(con: Console, diagnoses: Sequence[Diagnosis]) -> None:
    for index, d in enumerate(diagnoses):
        if index:
            con.print()
        verdict = "healthy" if d.healthy else f"broken at {d.first_broken}"
        table = Table(title=f"{d.node}: {verdict}", box=box.SIMPLE_HEAD, title_justify="left", show_edge=False)
        table.add_column("floor")
        table.add_column("state")
        table.add_column("detail", overflow="fold")
        for floor in d.floors:
            state = "-" if floor.ok is None else "ok" if floor.ok else "BROKEN"
            table.add_row(floor.name, state, floor.detail)
        con.print(table)
        if d.fix is not None:
            for trap_line in d.fix.traps:
                con.print(f"  {trap_line}", soft_wrap=True)
            con.print(f"  next: {d.fix.command}", soft_wrap=True)


def watch_line(sample: int, stamp: str, claims: Claims) -> str:
    """`[01] 2026-05-04T10:00:00Z free rke2-worker-dc1-gpu-a=0 ... total=1/3 terminating=1`."""
    free = " ".join(f"{n.name}={n.free}" for n in claims.nodes)
    total = claims.total
    terminating = sum(1 for h in claims.holders if h.terminating)
    return f"[{sample:02d}] {stamp} free {free} total={total.free}/{total.allocatable} terminating={terminating}"


def watch_json(sample: int, stamp: str, claims: Claims) -> str:
    total = claims.total
    document = {
        "sample": sample,
        "time": stamp,
        "free": {n.name: n.free for n in claims.nodes},
        "total": {"allocatable": total.allocatable, "allocated": total.allocated, "free": total.free},
        "terminating": sum(1 for h in claims.holders if h.terminating),
    }
    return json.dumps(document)
