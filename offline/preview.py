"""`python -m offline.preview --stack prod --out build/prod [--secret KEY=VALUE ...]`: the offline preview."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pulumi
import yaml

from config.arguments import ArgumentParser
from config.errors import ConfigError
from config.secret_sources import SecretSourceError, current
from config.secrets import SECRETS, auth_mode
from offline.render import tree, write_all
from offline.runner import (
    PROJECT,
    ROOT_DIR,
    StackFileError,
    placeholder_keys,
    read_stack_file,
    run_stack,
    secret_markers,
)


def parse_secret(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        # What was given may be the secret itself, typed without its key: never repeated.
        raise argparse.ArgumentTypeError("--secret takes KEY=VALUE; what was given has no KEY= (value not shown)")
    return key, value


# Said once per run when --secret is used: the value is now in the shell's history (and, while the preview runs,
# in `ps` for every user of the machine); the other two sources keep it off every command line.
HISTORY_NOTE = (
    "note: a value typed on a command line (--secret) stays in your shell's history; GPU_POOL_SECRET_<KEY> in the "
    "environment or a GPU_POOL_SECRETS_FILE outside the repository keep it off the command line"
)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="offline-preview", description=__doc__)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default build/<stack>)")
    parser.add_argument("--secret", type=parse_secret, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--stack-dir", type=Path, default=None, help="folder holding Pulumi.<stack>.yaml (default: the project)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the resource tree")
    parser.add_argument(
        "--inventory",
        action="store_true",
        help="print every URL and image the nodes and the cluster fetch, and the lab copy that serves each (what a "
        "lab with no route out must mirror: docs/air-gap.md)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out or Path("build") / args.stack
    if args.secret:
        print(HISTORY_NOTE, file=sys.stderr)
    try:
        # The command line wins for a key given both ways; the environment and the secrets file are never echoed.
        secrets = {**current(ROOT_DIR), **dict(args.secret)}
    except SecretSourceError as error:
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    try:
        stack_dir = args.stack_dir or ROOT_DIR
        config = read_stack_file(args.stack, stack_dir)
        recording = run_stack(
            args.stack, config=config, secrets=secrets, stack_file=stack_dir / f"Pulumi.{args.stack}.yaml"
        )
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ConfigError as error:
        print("invalid stack config:", file=sys.stderr)
        for message in error.messages:
            print(f"  {message}", file=sys.stderr)
        return 1
    except pulumi.RunError as error:
        # Raised by __main__.py with the validation messages already formatted, as `pulumi preview` shows them.
        print(str(error), file=sys.stderr)
        return 1
    markers = secret_markers(config, secrets)
    document = write_all(recording, out, PROJECT, args.stack, secrets.values(), markers)
    if not args.quiet:
        print(tree(recording, secrets.values()), end="")
        print()
    # The other auth mode's Proxmox credential is made up but never read: not worth a line.
    auth = auth_mode(config.get(f"{PROJECT}:proxmox"))
    unused = {f"{PROJECT}:{s.key}" for s in SECRETS if s.auth is not None and s.auth != auth}
    placeholders = [key for key in placeholder_keys(config, secrets) if key not in unused]
    print(summary(args.stack, out, document, placeholders), end="")
    print(steering_note(config), end="")
    print(repair_credential_note(config, args.stack), end="")
    print(reclaim_note(config), end="")
    if args.inventory:
        print(inventory_note(config), end="")
    return 0


def inventory_note(config: dict[str, Any]) -> str:
    """What the nodes and the cluster fetch for this stack, and from where (components/air_gap.py)."""
    from components.air_gap import inventory_text
    from components.rendered_plan import stack_inventory
    from components.stack_check import validate_stack

    values = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{PROJECT}:")}
    return inventory_text(stack_inventory(validate_stack(values)))


def repair_credential_note(config: dict[str, Any], stack: str) -> str:
    """With repair.unattended on, the Proxmox token the stack creates for the watcher (roles, privileges, paths) and
    the watcher: its Deployment and what its account may do in the cluster."""
    from components.stack_check import validate_stack
    from components.unattended.credential import credential_lines, credential_plan
    from components.unattended.rbac import watcher_lines
    from config.errors import ConfigError

    try:
        cfg = validate_stack({k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{PROJECT}:")})
    except (ConfigError, ValueError):
        return ""
    if not cfg.repair.unattended.enabled:
        return ""
    lines = [*credential_lines(credential_plan(cfg, stack)), *watcher_lines(cfg)]
    return "Unattended repair (gpu-pool:repair.unattended):\n" + "".join(f"  {line}\n" for line in lines)


def reclaim_note(config: dict[str, Any]) -> str:
    """With reclaim.idleNotebooks on, the policy's Deployment and what its account may do in the cluster."""
    from pydantic import ValidationError

    from components.reclaim.api import policy_lines
    from config.reclaim import ReclaimConfig

    try:
        cfg = ReclaimConfig.model_validate(config.get(f"{PROJECT}:reclaim") or {}).idle_notebooks
    except ValidationError:
        return ""
    if not cfg.enabled:
        return ""
    mode = "dryRun: reports, changes nothing" if cfg.dry_run else "stops idle notebooks"
    lines = [
        f"Deployment {cfg.namespace}/gpu-pool-reclaim (1 replica, Recreate, {cfg.image}; {mode}), reading "
        f"{cfg.prometheus_url}; its account may:",
        *policy_lines(),
    ]
    return "Notebook reclaim (gpu-pool:reclaim.idleNotebooks):\n" + "".join(f"  {line}\n" for line in lines)


def steering_note(config: dict[str, Any]) -> str:
    """With Kyverno off, the lines every GPU pod's spec needs, with this stack's taint and label."""
    from pydantic import ValidationError

    from config.kyverno import KyvernoConfig

    try:
        kyverno = KyvernoConfig.model_validate(config.get(f"{PROJECT}:kyverno") or {})
    except ValidationError:
        return ""
    if kyverno.enabled:
        return ""
    lines = kyverno.pod_spec_lines()
    return "Kyverno is off (gpu-pool:kyverno.enabled): every GPU pod's spec carries these itself:\n" + "".join(
        f"  {line}\n" for line in lines.splitlines()
    )


def summary(stack: str, out: Path, document: dict[str, Any], placeholders: list[str]) -> str:
    """The end of the console output: what was written, the stack outputs, and what the preview could not know."""
    manifests = len(list((out / "manifests").glob("*.yaml")))
    vms = len(list((out / "cloud-init").glob("*.yaml")))
    outputs = yaml.safe_dump(document["outputs"], sort_keys=True, width=120).rstrip("\n")
    lines = [
        f"offline preview of stack {stack!r}: {len(document['resources'])} resources, "
        f"{document['outputs'].get('schedulableGpuSlots', '?')} schedulable GPU slots",
        f"wrote {out}/: plan.json, graph.mmd, manifests/ ({manifests} objects), cloud-init/ ({vms} VMs), "
        "gpu-operator-values.yaml",
        "",
        "Outputs:",
        *(f"  {line}" for line in outputs.splitlines()),
        "",
    ]
    if placeholders:
        lines.append(
            f"Secrets not given, placeholders used: {', '.join(placeholders)} "
            "(give yours in the environment, e.g. GPU_POOL_SECRET_RKE2TOKEN, or a file outside the repo named by "
            "GPU_POOL_SECRETS_FILE; never on the make line, which make echoes)"
        )
    lines.append(
        "Host and cluster preflight skipped: offline there is no Proxmox API or cluster; `pulumi preview` runs them."
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
