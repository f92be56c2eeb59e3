"""Entry point of `gpu-pool`; the subcommands are built in this package."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("gpu-pool: no subcommand is available yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
