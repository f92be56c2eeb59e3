"""Where `gpu-pool discover` gets its answers: a saved `hardware/pci` answer, or the Proxmox API of the stack."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.secrets import BY_KEY
from config.text_file import NotUtf8Error, read_utf8
from day2.command import ExitStatus, Io
from day2.discover.cards import (
    Card,
    bars_mib,
    find_cards,
    other_nodes_answer,
    parse_answer,
    proxmox_mappings,
    report_json,
    report_text,
    stack_cards,
)
from day2.errors import Day2Error
from knowledge.gpu_cards import card_facts, driver_listing
from node.proxmox import Proxmox, ProxmoxFailed

# discover lists hardware, which an API token may do (it never logs in as root).
TOKEN_ENV = BY_KEY["proxmoxApiToken"].source_env


NAME = "discover"
HELP = "the NVIDIA cards of the stack's Proxmox nodes, as stack-file entries to paste"


def add_arguments(discover: argparse.ArgumentParser) -> None:
    discover.add_argument(
        "--from",
        dest="answer",
        metavar="FILE",
        help="a saved answer of `pvesh get /nodes/<node>/hardware/pci --output-format json` (- for stdin)",
    )
    discover.add_argument("--node", metavar="NAME", help="the Proxmox node that answer is from (with --from)")
    discover.add_argument(
        "--mappings",
        metavar="FILE",
        help="with --from: a saved `pvesh get /cluster/mapping/pci --output-format json`, to name cards mapped already",
    )
    discover.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="ADDRESS=FILE",
        help="a card's BARs: the host's /sys/bus/pci/devices/<ADDRESS>/resource, saved (fills barMiB; repeatable)",
    )
    discover.add_argument("--stack", metavar="NAME", help="read Pulumi.NAME.yaml: its endpoint, nodes and cards")
    discover.add_argument("--stack-dir", metavar="DIR", default=".", help="folder holding Pulumi.NAME.yaml")
    discover.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table or json")


def _read_stack(name: str, folder: Path) -> dict[str, Any]:
    # The stack file may still lack its cards (that is what discover is for): read it, do not validate it.
    from config.stack_file import StackFileError, read_stack_file

    try:
        return read_stack_file(name, folder)
    except StackFileError as error:
        raise Day2Error(f"--stack {name}: {error}") from None


def _load_json(source: str, save: str = "pvesh get /nodes/<node>/hardware/pci --output-format json") -> Any:
    try:
        text = sys.stdin.read() if source == "-" else read_utf8(Path(source))
    except OSError as error:
        raise Day2Error(f"--from {source}: cannot read it: {error.strerror}") from None
    except NotUtf8Error as error:
        raise Day2Error(f"--from {source}: {error}") from None
    if not text.strip():
        raise Day2Error(f"--from {source} is empty: save the answer with `{save} > FILE`")
    try:
        return json.loads(text)
    except ValueError:
        raise Day2Error(
            f"--from {source} is not JSON: use pvesh's `--output-format json` (its default is a table)"
        ) from None


def _proxmox(endpoint: str, insecure: bool) -> Proxmox:
    """The one Proxmox client (node/proxmox.py) with the token from the environment."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise Day2Error(
            f"asking the Proxmox API needs the token in the environment variable {TOKEN_ENV} "
            "(user@realm!tokenid=uuid), or a saved answer with --from FILE --node NAME"
        )
    pve = Proxmox(endpoint, insecure)
    pve.login(token, None)
    return pve


def _asked(pve: Proxmox, read: Callable[[], Any]) -> Any:
    """An answer of the API; a refusal or no answer is one line (exit 2)."""
    try:
        return read()
    except ProxmoxFailed as failure:
        if failure.status is not None:
            raise Day2Error(f"{pve.base}: the Proxmox API answered {failure.status} {failure.detail}") from None
        raise Day2Error(str(failure)) from None


def _bars(resources: list[str]) -> dict[str, int]:
    """`0000:01:00.0=FILE` -> {`0000:01:00`: MiB}: the card's BARs from a saved sysfs `resource` of the host."""
    found: dict[str, int] = {}
    for item in resources:
        address, sep, path = item.partition("=")
        if not sep or not path:
            raise Day2Error(f"--resource {item}: expected ADDRESS=FILE, e.g. 0000:01:00.0=resource-01.txt")
        try:
            text = read_utf8(Path(path))
        except OSError as error:
            raise Day2Error(f"--resource {item}: cannot read it: {error.strerror}") from None
        except NotUtf8Error as error:
            raise Day2Error(f"--resource {item}: {error}") from None
        slot = (address.lower() if address.count(":") == 2 else f"0000:{address.lower()}").split(".")[0]
        mib = bars_mib(text)
        if mib == 0:
            raise Day2Error(
                f"--resource {item}: no memory BAR in it; save it with `cat /sys/bus/pci/devices/{address}/resource`"
            )
        found[slot] = mib
    return found


def _driver_notes(cards: list[Card], raw: dict[str, Any]) -> None:
    """With a stack: a card its pinned driver does not list is said at once, before the preview refuses it."""
    operator = raw.get("gpu-pool:gpuOperator")
    driver = operator.get("driverVersion") if isinstance(operator, dict) else None
    if not isinstance(driver, str):
        return
    for card in cards:
        listing = driver_listing(card.entry["vendorDeviceId"], driver)
        if listing.verdict in ("later", "never") and card_facts(card.entry["vendorDeviceId"]).open_modules != "never":
            since = f" (first listed in {listing.first})" if listing.first else ""
            card.facts += f"; the stack's driver {driver} does not list it{since}"


def run(args: argparse.Namespace, io: Io) -> ExitStatus:
    out = io.out
    raw = _read_stack(args.stack, Path(args.stack_dir)) if args.stack else {}
    mapped = stack_cards(raw.get("gpu-pool:failureDomains"))
    bars = _bars(args.resource)
    nodes: dict[str, list[Card]] = {}
    if args.mappings and args.answer is None:
        raise Day2Error("--mappings goes with --from: against the API, discover reads /cluster/mapping/pci itself")
    if args.answer is not None:
        if not args.node:
            raise Day2Error("--from needs --node NAME: the Proxmox node the saved answer is from")
        in_proxmox = (
            proxmox_mappings(
                _load_json(args.mappings, "pvesh get /cluster/mapping/pci --output-format json"), args.mappings
            )
            if args.mappings
            else {}
        )
        answer = parse_answer(_load_json(args.answer), args.answer)
        other = other_nodes_answer(args.node, answer, raw.get("gpu-pool:failureDomains"))
        if other is not None:
            raise Day2Error(
                f"--from {args.answer}: it holds every card the stack gives node {other} and none of node "
                f"{args.node}'s, so it was saved on {other}: save node {args.node}'s answer there with "
                f"`pvesh get /nodes/{args.node}/hardware/pci --output-format json`, or pass --node {other}"
            )
        nodes[args.node] = find_cards(args.node, answer, mapped, in_proxmox, bars)
    else:
        proxmox = raw.get("gpu-pool:proxmox")
        domains = raw.get("gpu-pool:failureDomains")
        if not isinstance(proxmox, dict) or not proxmox.get("endpoint") or not isinstance(domains, list):
            raise Day2Error(
                "name a stack whose file has gpu-pool:proxmox.endpoint and failureDomains with their proxmoxNode "
                "(--stack NAME), or give a saved answer (--from FILE --node NAME)"
            )
        wanted = (
            [args.node] if args.node else sorted({str(d.get("proxmoxNode")) for d in domains if isinstance(d, dict)})
        )
        pve = _proxmox(str(proxmox["endpoint"]), bool(proxmox.get("insecure")))
        in_proxmox = proxmox_mappings(_asked(pve, pve.pci_mappings), "cluster/mapping/pci")
        for node in wanted:
            answer = _asked(pve, functools.partial(pve.hardware_pci, node))
            nodes[node] = find_cards(node, parse_answer(answer, f"node {node}"), mapped, in_proxmox, bars)
    for found in nodes.values():
        _driver_notes(found, raw)
    if args.output == "json":
        json.dump(report_json(nodes), out, indent=2)
        out.write("\n")
    else:
        out.write(report_text(nodes))
    cards = [card for found in nodes.values() for card in found]
    return ExitStatus.SUCCESS if cards and all(card.passable for card in cards) else ExitStatus.FINDING
