#!/usr/bin/env python3
"""The few API calls the GPU node run makes (run.sh), over the API server's REST interface, standard library only.

kubectl is not carried (it would not fit beside the node's programs in the device tool's 64 MiB), so this does what
the run needs of it, with the token and address of run.sh's kubeconfig (KUBE_SERVER, KUBE_TOKEN):

    kube.py raw PATH                      GET PATH, the body as text (e.g. /readyz)
    kube.py get PATH [JSONPATH...]        GET PATH as JSON; with dotted keys (a.b.c), print those values
    kube.py apply FILE                    create each object of FILE (an object or a List); existing ones are kept
    kube.py configmap NS NAME KEY=FILE    create a ConfigMap from a file
    kube.py logs NS POD                   the pod's log
    kube.py dump                          nodes, pods, configmaps and jobs of every namespace, as
                                          `kubectl get nodes,pods,configmaps,jobs -A -o json` writes them
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

SERVER = os.environ.get("KUBE_SERVER", "https://127.0.0.1:6443")
# The API server's self-signed serving certificate (run.sh's --cert-dir): nothing else is on this machine's loopback.
CONTEXT = ssl._create_unverified_context()

# Where each kind the run creates is listed: (API path prefix, plural, namespaced).
KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Pod": ("/api/v1", "pods", True),
    "Node": ("/api/v1", "nodes", False),
    "Job": ("/apis/batch/v1", "jobs", True),
    "RuntimeClass": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
}


def call(method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(SERVER + path, data=data, method=method)
    request.add_header("Authorization", "Bearer " + os.environ["KUBE_TOKEN"])
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=CONTEXT, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def collection(obj: dict[str, Any]) -> str:
    prefix, plural, namespaced = KINDS[obj["kind"]]
    if namespaced:
        return f"{prefix}/namespaces/{obj['metadata'].get('namespace', 'default')}/{plural}"
    return f"{prefix}/{plural}"


def create(obj: dict[str, Any]) -> int:
    status, body = call("POST", collection(obj), obj)
    # A new namespace's default ServiceAccount comes from kube-controller-manager a moment after the namespace.
    for _ in range(30):
        if not (status == 403 and b"serviceaccount" in body):
            break
        time.sleep(1)
        status, body = call("POST", collection(obj), obj)
    name = f"{obj['kind']}/{obj['metadata']['name']}"
    if status in (200, 201):
        print(f"{name} created")
        return 0
    if status == 409:
        print(f"{name} exists")
        return 0
    print(f"{name}: {status} {body.decode(errors='replace')}", file=sys.stderr)
    return 1


def dig(value: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def dump() -> dict[str, Any]:
    items = []
    for kind in ("Node", "Pod", "ConfigMap", "Job"):
        prefix, plural, _ = KINDS[kind]
        status, body = call("GET", f"{prefix}/{plural}")
        listed = json.loads(body) if status == 200 else {"items": []}
        for item in listed["items"]:
            # A list's items carry no kind or apiVersion; kubectl -o json puts them back.
            items.append({"apiVersion": prefix.removeprefix("/apis/").removeprefix("/api/"), "kind": kind, **item})
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    if command == "raw":
        status, body = call("GET", args[0])
        sys.stdout.write(body.decode(errors="replace"))
        return 0 if status == 200 else 1
    if command == "get":
        status, body = call("GET", args[0])
        if status != 200:
            print(f"{args[0]}: {status} {body.decode(errors='replace')}", file=sys.stderr)
            return 1
        obj = json.loads(body)
        if len(args) > 1:
            print(" ".join("" if dig(obj, key) is None else str(dig(obj, key)) for key in args[1:]))
        else:
            print(json.dumps(obj, indent=2))
        return 0
    if command == "apply":
        with open(args[0]) as handle:
            document = json.load(handle)
        objects = document["items"] if document.get("kind") == "List" else [document]
        return max((create(obj) for obj in objects), default=0)
    if command == "configmap":
        namespace, name, pair = args
        key, path = pair.split("=", 1)
        with open(path) as handle:
            data = handle.read()
        return create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {key: data},
            }
        )
    if command == "logs":
        status, body = call("GET", f"/api/v1/namespaces/{args[0]}/pods/{args[1]}/log")
        sys.stdout.write(body.decode(errors="replace"))
        return 0 if status == 200 else 1
    if command == "dump":
        json.dump(dump(), sys.stdout, indent=2)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
