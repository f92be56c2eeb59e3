"""Where the objects come from: a dump (`kubectl get nodes,pods,configmaps,jobs -A -o json`) or a live cluster."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from day2.errors import Day2Error
from day2.objects import JsonObject, Snapshot

DUMP_COMMAND = "kubectl get nodes,pods,configmaps,jobs -A -o json"
REQUEST_TIMEOUT_SECONDS = 15


def snapshot_from_document(document: Any, where: str) -> Snapshot:
    """A JSON List (kind List, or NodeList/PodList/...) of Kubernetes objects."""
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise Day2Error(f"{where}: not a JSON List of objects; write one with `{DUMP_COMMAND} > dump.json`")
    items = document["items"]
    list_kind = str(document.get("kind", ""))
    item_kind = list_kind.removesuffix("List") if list_kind.endswith("List") and list_kind != "List" else None
    objects: list[JsonObject] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise Day2Error(f"{where}: items[{index}] is not an object")
        if "kind" not in item and item_kind:
            item = {**item, "kind": item_kind}
        objects.append(item)
    return Snapshot.from_items(objects)


def load_dump(path: str) -> Snapshot:
    """Read a dump file, or standard input for `-`. Raises Day2Error naming the file and the problem."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise Day2Error(f"--from {path}: cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise Day2Error(f"--from {path}: not UTF-8 text") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise Day2Error(f"--from {path}: not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    return snapshot_from_document(document, f"--from {path}")


def load_live(kubeconfig: str | None, context: str | None) -> Snapshot:
    """List nodes, pods, configmaps and jobs across namespaces with the official client.

    kubeconfig/context None: kubectl's defaults (KUBECONFIG, ~/.kube/config, its current context).
    """
    from kubernetes import client, config  # imported here: dump-only runs never need the client

    where = f"context {context}" if context else "the current context"
    source = kubeconfig or "the default kubeconfig (KUBECONFIG or ~/.kube/config)"
    # urllib3 logs every retry as a warning; the one line below says what failed instead.
    logging.getLogger("urllib3").setLevel(logging.CRITICAL)
    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
    except Exception as error:  # ConfigException, OSError, or a file that is not a kubeconfig at all
        hint = "" if kubeconfig else "; read a dump instead with --from FILE"
        raise Day2Error(f"cannot load {where} from {source}: {_one_line(error)}{hint}") from None
    configuration = client.Configuration.get_default_copy()
    configuration.retries = 0
    api = client.ApiClient(configuration)
    server = f"{configuration.host} ({where})"
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    kinds = (
        ("Node", core.list_node),
        ("Pod", core.list_pod_for_all_namespaces),
        ("ConfigMap", core.list_config_map_for_all_namespaces),
        ("Job", batch.list_job_for_all_namespaces),
    )
    items: list[JsonObject] = []
    try:
        for kind, list_call in kinds:
            listed = list_call(_request_timeout=REQUEST_TIMEOUT_SECONDS)
            for item in api.sanitize_for_serialization(listed.items):
                items.append({"kind": kind, **item})
    except client.ApiException as error:
        raise Day2Error(f"the API server {server} refused to list {kind}s: {error.status} {error.reason}") from None
    except Exception as error:  # urllib3, ssl and socket errors: the cluster cannot be reached
        raise Day2Error(f"cannot reach the API server {server}: {root_cause(error)}") from None
    finally:
        api.close()
    return Snapshot.from_items(items)


def root_cause(error: BaseException) -> str:
    """The innermost reason of a chained error (urllib3 wraps the socket's in two layers), as one line."""
    current = error
    for _ in range(10):
        inner = getattr(current, "reason", None)
        inner = inner if isinstance(inner, BaseException) else current.__cause__ or current.__context__
        if inner is None or inner is current:
            break
        current = inner
    if isinstance(current, OSError) and current.strerror:
        return current.strerror
    return _one_line(current)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
