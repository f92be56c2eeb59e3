"""node-check as the zip `gpu-pool repair` sends to a GPU worker over SSH (base64 in the command line: no copy step,
nothing left behind); the zip is built by components/shared/payload.py, as the health check's is."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence

from components.shared.payload import module_closure, pack

# node-check and what it imports (components/shared/payload.py finds them): it runs on the node with the standard
# library alone; `python3 -m day2.node_check` from a copy needs the package's __main__ too.
NODE_CHECK_ENTRY = "day2.node_check.command"
NODE_CHECK_FILES = tuple(sorted(module_closure([NODE_CHECK_ENTRY, "day2.node_check.__main__"])))
# One argument of a command line is at most 128 KiB on Linux (MAX_ARG_STRLEN): the remote shell gets the whole
# command as one, so the encoded zip must leave room for the rest.
MAX_COMMAND_BYTES = 100_000


def node_check_zip() -> bytes:
    return pack(NODE_CHECK_ENTRY, also=["day2.node_check.__main__"])


def node_check_command(flags: Sequence[str], *, strict: bool) -> str:
    """A shell command for the node (run over SSH) that runs node-check from the zip with `flags`.

    As root where sudo needs no password (the kernel log is root's where kernel.dmesg_restrict is 1, Ubuntu's
    default), else as the login user (then the health floor reads no Xid and says so). `strict`: node-check's
    table and its exit code (1 on a broken floor), as a repair's check after the power cycle runs it; otherwise
    its JSON report is the answer and only an error (exit 2) fails."""
    encoded = base64.b64encode(node_check_zip()).decode()
    run = f'python3 "$f" {" ".join(shlex.quote(flag) for flag in flags)}' + ("" if strict else " -o json")
    ending = "" if strict else '; rc=$?; [ "$rc" -le 1 ] || exit "$rc"'
    command = (
        # The login's $TMPDIR where it has one (pam_tmpdir), else /tmp.
        'f=$(mktemp "${TMPDIR:-/tmp}/gpu-pool-node-check.XXXXXX") || exit 2; trap \'rm -f "$f"\' EXIT; '
        f'printf %s {encoded} | base64 -d > "$f" || exit 2; '
        f"if sudo -n true 2>/dev/null; then sudo -n {run}; else {run}; fi{ending}"
    )
    if len(command) > MAX_COMMAND_BYTES:
        raise ValueError(f"node-check's zip makes a {len(command)}-byte command, over {MAX_COMMAND_BYTES}")
    return command
