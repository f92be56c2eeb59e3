"""`python -m offline.diff --stack prod --before OLD.yaml`: what a config change will do, before `pulumi up`.

Runs the offline preview for the earlier stack file and for the current one, compares them resource by resource
(offline/plan_diff.py), prints a table like `pulumi preview --diff` and writes OUT/diff.json:
`{"stack", "before", "changes": [{"urn", "type", "name", "op", "keys", "replaceKeys", "deleteBeforeReplace",
"dangers", "info"}], "dangers": <count>, "earlierRefusals": [...], "wave": null or {"batches": [[domain...]...],
"domains": {domain: {"changes", "waitsFor", "steps"}}}}`. Unchanged resources are counted, not listed.
The earlier file is read with the rules that guard the next `up` waived (config/earlier_file.py): what they would
refuse in it is listed in `earlierRefusals`, since that file describes what is deployed.
Exit 0; 1 with --fail-on-danger when a danger is found; 2 when a stack file cannot be read or is refused.
Secrets come from where the offline preview takes them (offline/secret_sources.py: GPU_POOL_SECRET_<KEY> or the
file GPU_POOL_SECRETS_FILE names), never from the command line, so a malformed one is refused here as it would be
at preview, without its value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

from components.gpu_failure_domain.rollout import rollout_state
from components.gpu_failure_domain.rollout_state import DEPLOYED_ENV
from config.earlier_file import reading_earlier_file
from config.errors import ConfigError
from config.loader import validate_stack
from offline.plan_diff import Change, diff_recordings
from offline.recording import Recording
from offline.runner import PROJECT, ROOT_DIR, StackFileError, read_stack_file, run_stack
from offline.secret_sources import SecretSourceError, current
from offline.wave import Wave, wave_lines, wave_of

SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " "}


class DiffError(Exception):
    pass


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


def preview(stack: str, config: dict[str, Any], label: str, secrets: dict[str, str] | None = None) -> Recording:
    try:
        return run_stack(stack, config=config, secrets=secrets or {})
    except ConfigError as error:
        raise DiffError(f"the {label} stack config is refused:\n  " + "\n  ".join(error.messages)) from None
    except pulumi.RunError as error:
        raise DiffError(f"the {label} stack config is refused: {error}") from None


def diff_files(stack: str, before: Path, after: Path, secrets: dict[str, str] | None = None) -> Comparison:
    try:
        old_stack, old_dir = _stack_file(before)
        new_stack, new_dir = _stack_file(after)
        old_config = read_stack_file(old_stack, old_dir)
        new_config = read_stack_file(new_stack, new_dir)
    except StackFileError as error:
        raise DiffError(str(error)) from None
    return compare_configs(stack, old_config, new_config, secrets)


def deployed_from(config: dict[str, Any]) -> dict[str, Any]:
    """What the earlier stack file rolled each domain to: the Nodes' rollout state the cluster would report, so
    the current preview plans the same wave `pulumi preview` would plan from the cluster."""
    prefix = f"{PROJECT}:"
    cfg = validate_stack({k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)})
    return {d.name: {"rollout": rollout_state(d, cfg), "kubeletVersion": cfg.rke2.version} for d in cfg.failure_domains}


@contextmanager
def _deployed(state: dict[str, Any]) -> Iterator[None]:
    previous = os.environ.get(DEPLOYED_ENV)
    os.environ[DEPLOYED_ENV] = json.dumps(state)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DEPLOYED_ENV, None)
        else:
            os.environ[DEPLOYED_ENV] = previous


def compare_configs(
    stack: str, before: dict[str, Any], after: dict[str, Any], secrets: dict[str, str] | None = None
) -> Comparison:
    with reading_earlier_file() as refusals:
        old = preview(stack, before, "earlier", secrets)
        deployed = deployed_from(before)
    # Both previews run as the same stack, with the same secrets, so URNs match when the resources are the same.
    with _deployed(deployed):
        new = preview(stack, after, "current", secrets)
    changes = diff_recordings(old, new)
    return Comparison(changes, refusals, wave_of(new, {c.name for c in changes if c.op != "same"}))


def diff_configs(stack: str, before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    return compare_configs(stack, before, after).changes


def document(stack: str, before: Path, comparison: Comparison) -> dict[str, Any]:
    changes = comparison.changes
    listed = [change.as_json() for change in changes if change.op != "same" or change.info]
    return {
        "stack": stack,
        "before": str(before),
        "changes": listed,
        "dangers": sum(len(change.dangers) for change in changes),
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
    dangers = [(c.name, d) for c in changes for d in c.dangers]
    info = [(c.name, i) for c in changes for i in c.info]
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
    parser = argparse.ArgumentParser(prog="offline-diff", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stack", default="prod", help="the stack the change is for (default prod)")
    parser.add_argument("--before", type=Path, required=True, help="the earlier Pulumi.<stack>.yaml")
    parser.add_argument("--after", type=Path, default=None, help="the new stack file (default: the project's)")
    parser.add_argument("--out", type=Path, default=None, help="where diff.json goes (default build/<stack>)")
    parser.add_argument("--fail-on-danger", action="store_true", help="exit 1 when any danger is found")
    args = parser.parse_args(argv)
    after: Path = args.after or Path(os.path.relpath(ROOT_DIR / f"Pulumi.{args.stack}.yaml"))
    out: Path = args.out or Path("build") / args.stack
    try:
        comparison = diff_files(args.stack, args.before, after, current(ROOT_DIR))
    except (DiffError, SecretSourceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = document(args.stack, args.before, comparison)
    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"offline diff of stack {args.stack!r}: {args.before} -> {after}\n")
    print(table(comparison), end="")
    print(f"wrote {out}/diff.json")
    return 1 if args.fail_on_danger and result["dangers"] else 0


if __name__ == "__main__":
    sys.exit(main())
