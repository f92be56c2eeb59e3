"""`python -m offline.preview --stack prod --out build/prod [--secret KEY=VALUE ...]`: the offline preview."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pulumi

from config.errors import ConfigError
from offline.render import tree, write_all
from offline.runner import PROJECT, StackFileError, read_stack_file, run_stack


def parse_secret(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--secret takes KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offline-preview", description=__doc__)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default build/<stack>)")
    parser.add_argument("--secret", type=parse_secret, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--stack-dir", type=Path, default=None, help="folder holding Pulumi.<stack>.yaml (default: the project)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the resource tree")
    args = parser.parse_args(argv)
    out: Path = args.out or Path("build") / args.stack
    secrets = dict(args.secret)
    try:
        config = read_stack_file(args.stack, args.stack_dir) if args.stack_dir else None
        recording = run_stack(args.stack, config=config, secrets=secrets)
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
    document = write_all(recording, out, PROJECT, args.stack, secrets.values())
    if not args.quiet:
        print(tree(recording, secrets.values()), end="")
    print(
        f"\noffline preview of stack {args.stack!r}: {len(document['resources'])} resources, "
        f"{document['outputs'].get('schedulableGpuSlots', '?')} schedulable GPU slots; wrote {out}/plan.json, "
        f"{out}/manifests/, {out}/graph.mmd",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
