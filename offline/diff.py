"""`python -m offline.diff --stack prod --before OLD.yaml [--nodes NODES.json]`: what a change will do, before `up`.

Runs the offline preview for the earlier stack file and for the current one, compares them resource by resource
(offline/plan_diff.py), prints a table like `pulumi preview --diff` and writes OUT/diff.json:
`{"stack", "before", "nodes", "changes": [{"urn", "type", "name", "op", "keys", "replaceKeys",
"deleteBeforeReplace", "dangers", "info"}], "dangers": <count>, "waveDangers": [...], "nodesDangers": [...],
"earlierRefusals": [...],
"wave": null or {"batches": [[domain...]...], "domains": {domain: {"turn", "why", "changes", "waitsFor",
"steps"}}, "capacity": [{"out": [domain...], "slots": n}...]}}`. Unchanged resources are counted, not listed.
The current file is planned against the cluster's Nodes as `kubectl get nodes -o json` lists them: the file
`--nodes` names (a saved answer: "what will `up` do now", after a failed or interrupted wave), or the Nodes the
earlier file's `up` leaves, which are written as OUT/nodes.json for a user to edit and pass back. A NODES file
is trusted only as far as it holds: anything but a List of Nodes (or one Node), a Node without the status the plan
reads, a file with none of the stack's nodes, and an earlier file of another lab are refused; a deployed domain
it has no Node for is a danger (it would be planned as a first install).
The earlier file is read with the rules that guard the next `up` waived (config/earlier_file.py): what they would
refuse in it is listed in `earlierRefusals`, since that file describes what is deployed.
Exit 0; 1 with --fail-on-danger when a danger is found; 2 when a stack file cannot be read or is refused.
Secrets come from where the offline preview takes them (config/secret_sources.py: GPU_POOL_SECRET_<KEY> or the
file GPU_POOL_SECRETS_FILE names), never from the command line, so a malformed one is refused here as it would be
at preview, without its value.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

from components.gpu_failure_domain.plan import NODES_ENV, settled_nodes_of, version_only_note
from components.stack_check import validate_stack
from config.arguments import ArgumentParser
from config.earlier_file import reading_earlier_file
from config.errors import ConfigError
from config.secret_sources import SecretSourceError, current
from config.stack import StackConfig
from config.text_file import NotUtf8Error, read_utf8
from offline.plan_diff import Change, diff_recordings
from offline.recording import Recording
from offline.runner import PROJECT, ROOT_DIR, StackFileError, read_stack_file, run_stack
from offline.wave import Wave, wave_lines, wave_of

SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " "}


class DiffError(Exception):
    pass


def _kinds(items: list[Any]) -> str:
    counts = Counter(str(i.get("kind") or "no kind") if isinstance(i, dict) else type(i).__name__ for i in items)
    return ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))


def read_nodes(path: Path) -> dict[str, Any]:
    """A saved `kubectl get nodes -o json` (a List of Nodes, or one Node); refused with what is wrong, never
    half-read. Every problem of the file is said at once. A file of other objects, or Nodes without the status the
    plan reads, would otherwise plan every domain as a first install and print "Dangers: none" (FIELD-REVIEW-5)."""
    try:
        document = json.loads(read_utf8(path))
    except OSError as error:
        raise DiffError(f"NODES: cannot read {path}: {error.strerror}") from None
    except NotUtf8Error as error:
        raise DiffError(f"NODES: {path}: {error}") from None
    except ValueError as error:
        raise DiffError(
            f"NODES: {path} is not JSON ({error}): save it with `kubectl get nodes -o json > {path}`"
        ) from None
    save = f"save the cluster's Nodes with `kubectl get nodes -o json > {path}`"
    if isinstance(document, dict) and document.get("kind") == "Node":
        document = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [document]}
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        found = document.get("kind") if isinstance(document, dict) else None
        what = f"a {found}" if found else ("an object without `items`" if isinstance(document, dict) else "no object")
        raise DiffError(
            f"NODES: {path} is not a `kubectl get nodes -o json` answer (a List of Nodes or one Node): it holds "
            f"{what}: {save}"
        )
    items: list[Any] = document["items"]
    others = [i for i in items if not isinstance(i, dict) or i.get("kind") != "Node"]
    if others:
        raise DiffError(
            f"NODES: {path} lists {_kinds(items)}, not only Nodes (a `kubectl get pods -o json` or another "
            f"resource's list?): {save}"
        )
    problems: list[str] = []
    for index, item in enumerate(items):
        name = (item.get("metadata") or {}).get("name") or f"items[{index}] (no metadata.name)"
        raw_status = item.get("status")
        status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
        if not isinstance(status.get("conditions"), list) or not status["conditions"]:
            problems.append(
                f"NODES: Node {name} in {path} has no status.conditions, so nothing says whether it is Ready: {save} "
                "(a Node saved from a manifest or `kubectl create --dry-run` has no status)"
            )
        raw_info = status.get("nodeInfo")
        info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
        if not info.get("kubeletVersion"):
            problems.append(
                f"NODES: Node {name} in {path} has no status.nodeInfo.kubeletVersion, so the RKE2 wave cannot "
                f"tell what it runs: {save}"
            )
    if problems:
        raise DiffError("\n  ".join(problems))
    return document


def nodes_problems(
    old: StackConfig, new: StackConfig, nodes: dict[str, Any] | None, nodes_path: Path | None
) -> tuple[list[str], list[str], list[str]]:
    """(refusals, dangers, info) of the two stack files and the saved Nodes, taken together: an earlier file of
    another lab, a NODES file of another cluster, and the deployed domains NODES has no Node for."""
    refusals: list[str] = []
    dangers: list[str] = []
    info: list[str] = []
    shared_domains = {d.name for d in old.failure_domains} & {d.name for d in new.failure_domains}
    shared_hosts = {d.hostname for d in old.failure_domains} & {d.hostname for d in new.failure_domains}
    if not shared_domains and not shared_hosts and old.proxmox.endpoint != new.proxmox.endpoint:
        refusals.append(
            f"BEFORE: the earlier file shares no failure domain ({', '.join(d.name for d in old.failure_domains)} "
            f"vs {', '.join(d.name for d in new.failure_domains)}), no node and not the Proxmox endpoint "
            f"({old.proxmox.endpoint} vs {new.proxmox.endpoint}) with the current one: it is another lab's stack "
            "file, and the diff would plan a new cluster; pass an earlier version of this stack's file (e.g. "
            "`git show HEAD~1:Pulumi.<stack>.yaml > /tmp/old/Pulumi.<stack>.yaml`)"
        )
    if nodes is None:
        return refusals, dangers, info
    names = {str((item.get("metadata") or {}).get("name")) for item in nodes.get("items") or []}
    missing = [d for d in new.failure_domains if d.hostname not in names]
    if missing and len(missing) == len(new.failure_domains):
        found = ", ".join(sorted(names)[:5]) + (" ..." if len(names) > 5 else "") if names else "no Node"
        refusals.append(
            f"NODES: {nodes_path} has no Node of this stack ({', '.join(d.hostname for d in missing)}); it lists "
            f"{found}: it is another cluster's answer, or not this stack's; save this cluster's with "
            "`kubectl get nodes -o json` (the context of the stack's cluster)"
        )
        return refusals, dangers, info
    deployed = {d.name for d in old.failure_domains}
    for domain in missing:
        if domain.name in deployed:
            dangers.append(
                f"NODES has no Node {domain.hostname}, so domain {domain.name} is planned as a first install (a new "
                "VM, no drain, no wave) although the earlier file deploys it: if that node exists, NODES is not "
                "this cluster's whole answer; save it again with `kubectl get nodes -o json`"
            )
        else:
            info.append(f"domain {domain.name} is new ({domain.hostname} is not in NODES): planned as a first install")
    return refusals, dangers, info


def _stack_file(path: Path) -> tuple[str, Path]:
    """`Pulumi.<stack>.yaml` anywhere -> (stack, folder)."""
    name = path.name
    if not (name.startswith("Pulumi.") and name.endswith(".yaml")) or name.count(".") < 2:
        raise DiffError(f"{path} is not a stack file: expected a name like Pulumi.<stack>.yaml")
    return name[len("Pulumi.") : -len(".yaml")], path.parent


@dataclass
class Comparison:
    changes: list[Change]
    earlier_refusals: list[str] = field(default_factory=list)
    wave: Wave | None = None
    # The Nodes the current file was planned against (`kubectl get nodes -o json`).
    nodes: dict[str, Any] = field(default_factory=dict)
    # What the saved Nodes say about the plan: deployed domains without a Node (dangers), new ones (info).
    nodes_dangers: list[str] = field(default_factory=list)
    nodes_info: list[str] = field(default_factory=list)

    @property
    def wave_dangers(self) -> list[str]:
        return self.wave.dangers if self.wave else []


def preview(
    stack: str,
    config: dict[str, Any],
    label: str,
    secrets: dict[str, str] | None = None,
    stack_file: Path | None = None,
) -> Recording:
    """The program's preview of `config`; `stack_file`, where the config came from one, is read as the program reads
    its own (an integer written with a leading zero is refused, as `make preview` refuses it)."""
    try:
        return run_stack(stack, config=config, secrets=secrets or {}, stack_file=stack_file)
    except ConfigError as error:
        raise DiffError(f"the {label} stack config is refused:\n  " + "\n  ".join(error.messages)) from None
    except pulumi.RunError as error:
        raise DiffError(f"the {label} stack config is refused: {error}") from None


def diff_files(
    stack: str,
    before: Path,
    after: Path,
    secrets: dict[str, str] | None = None,
    nodes: dict[str, Any] | None = None,
    nodes_path: Path | None = None,
) -> Comparison:
    try:
        old_stack, old_dir = _stack_file(before)
        new_stack, new_dir = _stack_file(after)
        old_config = read_stack_file(old_stack, old_dir)
        new_config = read_stack_file(new_stack, new_dir)
    except StackFileError as error:
        raise DiffError(str(error)) from None
    return compare_configs(stack, old_config, new_config, secrets, nodes, nodes_path, after_file=after)


def _stack_config(config: dict[str, Any]) -> StackConfig:
    prefix = f"{PROJECT}:"
    return validate_stack({k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)})


def settled_nodes(config: dict[str, Any]) -> dict[str, Any]:
    """The Nodes a stack file's `up` leaves (`kubectl get nodes -o json`): every worker serving on what the file
    pins, its rollout recorded. The current file is planned against them as `pulumi preview` plans against the
    cluster."""
    return settled_nodes_of(_stack_config(config))


@contextmanager
def observing(nodes: dict[str, Any]) -> Iterator[None]:
    """The preview plans against these Nodes instead of a cluster (the program reads NODES_ENV offline)."""
    previous = os.environ.get(NODES_ENV)
    with tempfile.TemporaryDirectory(prefix="gpu-pool-nodes-") as folder:
        path = Path(folder) / "nodes.json"
        path.write_text(json.dumps(nodes), encoding="utf-8")
        os.environ[NODES_ENV] = str(path)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(NODES_ENV, None)
            else:
                os.environ[NODES_ENV] = previous


def compare_configs(
    stack: str,
    before: dict[str, Any],
    after: dict[str, Any],
    secrets: dict[str, str] | None = None,
    nodes: dict[str, Any] | None = None,
    nodes_path: Path | None = None,
    after_file: Path | None = None,
) -> Comparison:
    """The earlier file as a settled deployment (planned against the Nodes its own `up` leaves: no turn, nothing to
    roll), against the current file planned against `nodes` (default: those same Nodes)."""
    # Both files and the saved Nodes are checked together before anything is previewed: a file of another lab
    # or another cluster's Nodes is refused, not planned as a new cluster.
    try:
        new_stack: StackConfig | None = _stack_config(after)
    except ConfigError:
        new_stack = None  # the current file's preview below refuses it, with every problem its text shows
    with reading_earlier_file() as refusals:
        try:
            old_stack = _stack_config(before)
        except ConfigError as error:
            raise DiffError("the earlier stack config is refused:\n  " + "\n  ".join(error.messages)) from None
        nodes_dangers: list[str] = []
        nodes_info: list[str] = []
        if new_stack is not None:
            refused, nodes_dangers, nodes_info = nodes_problems(
                old_stack, new_stack, nodes, nodes_path or Path("NODES")
            )
            if refused:
                raise DiffError("\n  ".join(refused))
        settled = settled_nodes_of(old_stack)
        with observing(settled):
            old = preview(stack, before, "earlier", secrets)
    observed = nodes if nodes is not None else settled
    # Both previews run as the same stack, with the same secrets, so URNs match when the resources are the same.
    with observing(observed):
        new = preview(stack, after, "current", secrets, after_file)
    changes = diff_recordings(old, new)
    wave = wave_of(new, {c.name for c in changes if c.op != "same"})
    if (
        new_stack is not None
        and wave is not None
        and any({"driver", "driver-template"} & set(t.changes) for t in wave.domains.values())
    ):
        nodes_info += cordoned_gpu_nodes_outside(new_stack, observed)
    if new_stack is not None and (note := version_only_note(new_stack, observed)):
        nodes_info.append(note)
    return Comparison(changes, refusals, wave, observed, nodes_dangers, nodes_info)


def cordoned_gpu_nodes_outside(stack: StackConfig, nodes: dict[str, Any]) -> list[str]:
    """With no upgrade slots of its own the GPU Operator upgrades every cordoned node in upgrade-required, not only
    the wave's (k8s-operator-libs upgrade_inplace.go; FIELD-REVIEW-5 H1): the cordoned GPU nodes the stack does
    not own are upgraded, their GPU pods deleted, as soon as the new release lands."""
    ours = {d.hostname for d in stack.failure_domains}
    found = []
    for item in nodes.get("items") or []:
        name = str((item.get("metadata") or {}).get("name"))
        capacity = ((item.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu", "0")
        gpus = str(capacity).isdigit() and int(str(capacity)) > 0
        if name not in ours and gpus and (item.get("spec") or {}).get("unschedulable"):
            found.append(name)
    return [
        f"{name} is a cordoned GPU node outside this stack: the GPU Operator upgrades its driver too (it acts on "
        "every cordoned node) as soon as the new release lands, deleting its GPU pods"
        for name in sorted(found)
    ]


def diff_configs(
    stack: str, before: dict[str, Any], after: dict[str, Any], nodes: dict[str, Any] | None = None
) -> list[Change]:
    return compare_configs(stack, before, after, nodes=nodes).changes


def document(stack: str, before: Path, comparison: Comparison, nodes: Path | None = None) -> dict[str, Any]:
    changes = comparison.changes
    listed = [change.as_json() for change in changes if change.op != "same" or change.info]
    return {
        "stack": stack,
        "before": str(before),
        "nodes": str(nodes) if nodes else None,
        "changes": listed,
        "dangers": sum(len(change.dangers) for change in changes)
        + len(comparison.wave_dangers)
        + len(comparison.nodes_dangers),
        "waveDangers": comparison.wave_dangers,
        "nodesDangers": comparison.nodes_dangers,
        "earlierRefusals": comparison.earlier_refusals,
        "wave": comparison.wave.as_json() if comparison.wave else None,
    }


def table(comparison: Comparison) -> str:
    changes = comparison.changes
    shown = [c for c in changes if c.op != "same" or c.info]
    lines: list[str] = []
    if shown:
        width_type = max(len(c.type) for c in shown)
        width_name = max(len(c.name) for c in shown)
        lines.append(f"     {'TYPE':<{width_type}}  {'NAME':<{width_name}}  {'OP':<22} KEYS")
        for c in shown:
            keys = ", ".join(f"[{k}]" if k in c.replace_keys else k for k in c.keys[:6])
            more = f" (+{len(c.keys) - 6} more)" if len(c.keys) > 6 else ""
            op = c.op + (" (delete first)" if c.delete_before_replace else "")
            lines.append(f"  {SYMBOL[c.op]:<2} {c.type:<{width_type}}  {c.name:<{width_name}}  {op:<22} {keys}{more}")
    counts = {op: sum(1 for c in changes if c.op == op) for op in ("create", "update", "replace", "delete", "same")}
    lines.append("")
    lines.append(
        "Resources: "
        + ", ".join(f"{counts[op]} to {op}" for op in ("create", "update", "replace", "delete") if counts[op])
        + ("; " if any(counts[op] for op in ("create", "update", "replace", "delete")) else "")
        + f"{counts['same']} unchanged"
    )
    dangers = (
        [(c.name, d) for c in changes for d in c.dangers]
        + [("wave", d) for d in comparison.wave_dangers]
        + [("nodes", d) for d in comparison.nodes_dangers]
    )
    info = [(c.name, i) for c in changes for i in c.info] + [("nodes", i) for i in comparison.nodes_info]
    if dangers:
        lines += ["", f"Dangers ({len(dangers)}):", *(f"  ! {text}" for _, text in dangers)]
    else:
        lines += ["", "Dangers: none"]
    if comparison.wave:
        lines += ["", *wave_lines(comparison.wave)]
    if info:
        lines += ["", "Also:", *(f"  - {text}" for _, text in info)]
    if comparison.earlier_refusals:
        lines += [
            "",
            "The earlier file breaks rules added since (compared anyway; the current file must pass them):",
            *(f"  - {text}" for text in comparison.earlier_refusals),
        ]
    lines.append("[KEY] forces a replacement.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="offline-diff", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stack", default="prod", help="the stack the change is for (default prod)")
    parser.add_argument("--before", type=Path, required=True, help="the earlier Pulumi.<stack>.yaml")
    parser.add_argument("--after", type=Path, default=None, help="the new stack file (default: the project's)")
    parser.add_argument("--out", type=Path, default=None, help="where diff.json goes (default build/<stack>)")
    parser.add_argument(
        "--nodes",
        type=Path,
        default=None,
        help="a saved `kubectl get nodes -o json` to plan against (default: the Nodes the earlier file's up leaves)",
    )
    parser.add_argument("--fail-on-danger", action="store_true", help="exit 1 when any danger is found")
    args = parser.parse_args(argv)
    after: Path = args.after or Path(os.path.relpath(ROOT_DIR / f"Pulumi.{args.stack}.yaml"))
    out: Path = args.out or Path("build") / args.stack
    try:
        nodes = read_nodes(args.nodes) if args.nodes else None
        comparison = diff_files(args.stack, args.before, after, current(ROOT_DIR), nodes, args.nodes)
    except (DiffError, SecretSourceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = document(args.stack, args.before, comparison, args.nodes)
    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written = ["diff.json"]
    if args.nodes is None:
        (out / "nodes.json").write_text(json.dumps(comparison.nodes, indent=2) + "\n", encoding="utf-8")
        written.append("nodes.json (the Nodes assumed: edit one and pass it back with NODES=)")
    source = f"the Nodes in {args.nodes}" if args.nodes else "the Nodes the earlier file's `up` leaves"
    print(f"offline diff of stack {args.stack!r}: {args.before} -> {after}, planned against {source}\n")
    print(table(comparison), end="")
    print(f"wrote {out}/: {', '.join(written)}")
    return 1 if args.fail_on_danger and result["dangers"] else 0


if __name__ == "__main__":
    sys.exit(main())
