"""`gpu-pool doctor [NODE]`: walk a GPU node's floors from the driver up (node-check's reports below them)."""

from __future__ import annotations

import argparse

from config.project import PROJECT
from day2.arguments import add_cluster_arguments, pool_facts, sampler
from day2.command import ExitStatus, Io
from day2.doctor.walk import diagnose_all, require_known_node
from day2.errors import Day2Error
from day2.sources import DOCTOR_NEEDS

NAME = "doctor"
HELP = "walk a GPU node's floors from the driver up"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cluster_arguments(parser)
    parser.add_argument("node", nargs="?", metavar="NODE", help="node name (default: every GPU node)")
    parser.add_argument(
        "--node-check",
        action="append",
        default=[],
        metavar="FILE",
        help="`gpu-pool node-check -o json` from a node: its floors stand below driver (repeatable, one per node)",
    )


def run(args: argparse.Namespace, io: Io) -> ExitStatus:
    facts = pool_facts(args)
    from day2 import render
    from day2.doctor.node_report import read_node_checks

    node_floors = read_node_checks(args.node_check)
    snapshot = sampler(args, facts, DOCTOR_NEEDS)()
    if args.node:
        require_known_node(snapshot, facts, args.node, "the dump" if args.dump is not None else "the cluster")
    diagnoses = diagnose_all(snapshot, facts, args.node, node_floors)
    if stray := sorted(set(node_floors) - {d.node for d in diagnoses}):
        checked = ", ".join(d.node for d in diagnoses) or "none"
        stray_nodes = ", ".join(stray)
        raise Day2Error(f"--node-check: a report of {stray_nodes}, which doctor does not check (it checks {checked})")
    if not diagnoses:
        label = f"{facts.marking.label_key}={facts.marking.label_value}"
        io.err.write(f"{PROJECT}: no GPU node found: no node carries {label}; name a NODE or pass --stack\n")
        if args.output == "json":
            render.write_json([], io.out)
        return ExitStatus.FINDING
    if args.output == "json":
        documents = [render.diagnosis_json(d) for d in diagnoses]
        render.write_json(documents[0] if args.node else documents, io.out)
    else:
        render.print_diagnoses(diagnoses, io.out)
    return ExitStatus.SUCCESS if all(d.healthy for d in diagnoses) else ExitStatus.FINDING
