"""A stand-in `kubectl` for the node-steps script's kubectl transport (node/kube.py Kubectl): it parses what that
transport runs (`get --raw`, `create --raw -f -`, `replace --raw -f -`, `delete --raw`, `patch <resource> <name>
--type ... -p ... [-n ns] [--subresource status]`), answers it from a MemoryApi kept as JSON in FAKE_KUBE_STATE, and
prints what kubectl prints: the body, or `Error from server (<Reason>): <message>` and exit 1. FAKE_JOURNAL gets a
line per call (`kubectl <METHOD> <path>`), beside the Proxmox stand-in's, so a test asserts the order across both.
`state["down"]` makes it answer as kubectl does when the API server refuses connections."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.node.memory_api import MemoryApi

MERGE = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json"}


def _option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _patch_path(resource: str, name: str, namespace: str | None, sub: str | None) -> str:
    plural, _, qualifier = resource.partition(".")
    if qualifier:
        version, _, group = qualifier.partition(".")
        api = f"/apis/{group}/{version}"
    else:
        api = "/api/v1"
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{api}{where}/{plural}/{name}" + (f"/{sub}" if sub else "")


def request_of(args: list[str], stdin: str) -> tuple[str, str, bytes | None, str]:
    """(method, path, body, content type) of a kubectl command line the transport runs."""
    while args and args[0] in ("--kubeconfig", "--context"):
        args = args[2:]
    verb = args[0]
    if verb in ("get", "create", "replace", "delete") and "--raw" in args:
        path = str(_option(args, "--raw"))
        method = {"get": "GET", "create": "POST", "replace": "PUT", "delete": "DELETE"}[verb]
        return method, path, stdin.encode() if method in ("POST", "PUT") else None, "application/json"
    if verb == "patch":
        kind = _option(args, "--type") or "strategic"
        path = _patch_path(args[1], args[2], _option(args, "-n"), _option(args, "--subresource"))
        return "PATCH", path, str(_option(args, "-p")).encode(), MERGE.get(kind, "application/json-patch+json")
    raise SystemExit(f"fake kubectl: no {' '.join(args)}")


def main() -> int:
    args = sys.argv[1:]
    state_path = Path(os.environ["FAKE_KUBE_STATE"])
    state = json.loads(state_path.read_text())
    stdin = sys.stdin.read() if ("-f" in args and "-" in args) else ""
    method, path, body, content_type = request_of(args, stdin)
    with open(os.environ["FAKE_JOURNAL"], "a") as journal:
        journal.write(f"kubectl {method} {path}\n")
    if state.get("down"):
        print("The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?")
        return 1
    api = MemoryApi.of_state(state)
    answer = api.request(method, path, body, content_type)
    state_path.write_text(json.dumps({**state, **api.state()}))
    if answer.status >= 300:
        message = json.loads(answer.body or b"{}").get("message", "")
        print(f"Error from server ({answer.reason}): {message}", file=sys.stderr)
        return 1
    sys.stdout.write(answer.body.decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
