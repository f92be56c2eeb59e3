"""`gpu-pool node-check`: a GPU worker's own floors from the PCI bus up (pci, link, driver, nvml, health).

Runs on the node (standard library only): `python3 -m day2.node_check` from a copy of day2/ and knowledge/, or
`gpu-pool node-check` where the project is installed. Reads /sys, /proc and /run live, or copies of them
(--sysfs-root, --proc-root, --run-root), a saved kernel log (--kernel-log) and a saved NVML reading
(--nvml-json). Same JSON shape and exit codes as doctor: 0 healthy, 1 a broken floor, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from config.arguments import ArgumentParser
from day2.command import ExitStatus, Io, guarded
from day2.node_check.facts import (
    NodeFacts,
    NodeInputError,
    read_devices,
    read_identity,
    read_kernel_log,
    read_module,
    read_nvml_json,
)
from day2.node_check.floors import Expected, report_json, table, walk
from day2.node_check.nvml import NvmlUnavailable, NvmlVersionMismatch, nvml_reading

NAME = "node-check"
HELP = "on a GPU worker: its floors from the PCI bus up (pci, link, driver, nvml, health)"
PROG = f"gpu-pool {NAME}"
LIVE_SYSFS = Path("/sys")


class _Parser(ArgumentParser):
    error_type = NodeInputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    read = parser.add_argument_group("what to read (default: this machine, live)")
    read.add_argument("--sysfs-root", type=Path, default=LIVE_SYSFS, metavar="DIR", help="/sys or a copy of it")
    read.add_argument("--proc-root", type=Path, default=Path("/proc"), metavar="DIR", help="/proc or a copy")
    read.add_argument("--run-root", type=Path, default=Path("/run"), metavar="DIR", help="/run or a copy")
    read.add_argument(
        "--etc-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="/etc or a copy, for its machine-id (default: /etc live, not read from copies)",
    )
    read.add_argument(
        "--kernel-log", type=Path, metavar="FILE", help="saved `dmesg` output (default: run dmesg when live)"
    )
    read.add_argument("--nvml-json", type=Path, metavar="FILE", help="a saved NVML reading instead of pynvml")
    read.add_argument("--save-nvml", type=Path, metavar="FILE", help="write the live NVML reading to FILE")
    expect = parser.add_argument_group("what the stack expects (or --stack NAME where the project is installed)")
    expect.add_argument("--expect-id", action="append", default=[], metavar="VVVV:DDDD", help="a card, per card")
    expect.add_argument("--expect-subsystem", action="append", default=[], metavar="VVVV:DDDD", help="per card")
    expect.add_argument("--expect-driver", metavar="VERSION", help="the pinned driver version, e.g. 580.159.04")
    expect.add_argument("--proxmox-node", metavar="NAME", help="the VM's Proxmox node (names the power cycle)")
    expect.add_argument("--vm-id", type=int, metavar="ID", help="the VM's id (names the power cycle)")
    expect.add_argument("--stack", metavar="NAME", help="read the expectations from Pulumi.NAME.yaml")
    expect.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="folder of the stack file")
    expect.add_argument("--print-flags", action="store_true", help="with --stack: print the flags for the node")
    parser.add_argument("--node", metavar="NAME", help="the node's name in the output (default: the hostname)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table or json")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="A GPU worker's floors from the PCI bus up: pci, link, driver, nvml, health."
    )
    add_arguments(parser)
    return parser


def _expected(args: argparse.Namespace) -> Expected:
    if args.stack:
        try:
            from day2.node_stack import expected_from_stack  # pydantic: only where the project is installed
        except ImportError:
            raise NodeInputError(
                f"--stack {args.stack}: reading the stack file needs the project's environment, which this machine "
                "lacks; where the project is installed, `gpu-pool node-check --stack NAME --node NODE --print-flags` "
                "prints the flags to pass here instead"
            ) from None
        return expected_from_stack(args.stack, args.stack_dir, args.node or socket.gethostname())
    for flag, values in (("--expect-id", args.expect_id), ("--expect-subsystem", args.expect_subsystem)):
        for value in values:
            if (
                len(value) != 9
                or value[4] != ":"
                or not all(c in "0123456789abcdefABCDEF" for c in value[:4] + value[5:])
            ):
                raise NodeInputError(f"{flag} {value}: expected vvvv:dddd in hex, e.g. 10de:2335")
    return Expected(
        ids=tuple(args.expect_id),
        subsystems=tuple(args.expect_subsystem),
        driver=args.expect_driver,
        proxmox_node=args.proxmox_node,
        vm_id=args.vm_id,
    )


def _live_kernel_log() -> tuple[str, ...] | None:
    try:
        done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(done.stdout.splitlines()) if done.returncode == 0 else None


def read_facts(args: argparse.Namespace) -> NodeFacts:
    live = args.sysfs_root == LIVE_SYSFS
    if args.save_nvml and (args.nvml_json or not live):
        raise NodeInputError(
            "--save-nvml writes the live NVML reading: run it on the node without --nvml-json and --sysfs-root"
        )
    devices = read_devices(args.sysfs_root)  # first: a wrong root is the likeliest mistake
    log = read_kernel_log(args.kernel_log) if args.kernel_log else (_live_kernel_log() if live else None)
    reading, missing = None, None
    if args.nvml_json:
        reading = read_nvml_json(args.nvml_json)
    elif live:
        try:
            reading = nvml_reading()
        except NvmlUnavailable as why:
            missing = str(why)
        except NvmlVersionMismatch as why:
            missing = f"{why}: the loaded module and the NVML library differ"
        except Exception as error:  # an nvidia-ml-py this code has not met: say so, check the other floors
            missing = f"NVML reading failed: {type(error).__name__}: {error}"
    else:
        missing = "reading a copy: pass --nvml-json FILE for its NVML reading"
    if reading is not None and args.save_nvml:
        try:
            args.save_nvml.write_text(json.dumps(reading, indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            raise NodeInputError(f"--save-nvml {args.save_nvml}: {error.strerror}") from None
    # The machine and boot ids say which machine a saved report is from: never this machine's for a copy.
    etc_root = args.etc_root or (Path("/etc") if live else None)
    machine_id, boot_id = read_identity(etc_root, args.proc_root)
    return NodeFacts(
        devices=devices,
        module=read_module(args.sysfs_root, args.proc_root, args.run_root),
        kernel_log=log,
        nvml=reading,
        nvml_missing=missing,
        machine_id=machine_id,
        boot_id=boot_id,
    )


def run(args: argparse.Namespace, io: Io) -> ExitStatus:
    expected = _expected(args)
    if args.print_flags:
        if not args.stack:
            raise NodeInputError("--print-flags prints what --stack expects: add --stack NAME --node NODE")
        from day2.node_stack import as_flags  # imported above by _expected: the environment is there

        io.out.write(" ".join(as_flags(expected)) + "\n")
        return ExitStatus.SUCCESS
    report = walk(read_facts(args), expected, args.node or socket.gethostname())
    if args.output == "json":
        io.out.write(json.dumps(report_json(report), indent=2) + "\n")
    else:
        io.out.write(table([report]))
    return ExitStatus.SUCCESS if report.healthy else ExitStatus.FINDING


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """node-check on the node, on its own (python3 -m day2.node_check): no clock or sleep is read."""
    io = Io(out or sys.stdout, err or sys.stderr, time.sleep, lambda: datetime.now(UTC))
    return guarded(PROG, lambda: run(build_parser().parse_args(argv), io), io.err, user_errors=(NodeInputError,))


if __name__ == "__main__":
    sys.exit(main())
