"""Where the objects come from: a dump (`kubectl get nodes,pods,configmaps,jobs -A -o json`) or a live cluster."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from config.text_file import NotUtf8Error, read_utf8
from day2.errors import Day2Error
from day2.kube_client import connect
from day2.objects import JsonObject, Snapshot
from knowledge.kubeflow import notebooks_path
from node.kube import ApiError

DUMP_COMMAND = "kubectl get nodes,pods,configmaps,jobs -A -o json"
# The kinds each command reads, and the kubectl resource name that lists each. Jobs are read by doctor's smoke
# floor but never required: a cluster can truly have none (smoke test off, finished Jobs cleaned up), and then
# that floor already says so. Every running cluster has Nodes, Pods (RKE2's control plane runs as static pods)
# and ConfigMaps (kube-root-ca.crt is published into every namespace since Kubernetes 1.21, RootCAConfigMap GA),
# so a dump with none of one of them was written without it, and counting on would give wrong numbers, exit 0.
CLAIMS_NEEDS = ("Node", "Pod")
DOCTOR_NEEDS = ("Node", "Pod", "ConfigMap")
_WRITE_AGAIN = f"write it with `{DUMP_COMMAND} > dump.json`"
# The first key of a YAML dump (`kubectl get ... -o yaml`): a List starts with apiVersion, items or kind.
_YAML_START = re.compile(r"^(---|(apiVersion|items|kind|metadata)\s*:)")


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


def require_kinds(snapshot: Snapshot, needs: tuple[str, ...], where: str, command: str) -> None:
    """Refuse a dump without the kinds `command` reads, naming the `kubectl get` line that writes a complete one."""
    present = {"Node": snapshot.nodes, "Pod": snapshot.pods, "ConfigMap": snapshot.configmaps, "Job": snapshot.jobs}
    missing = [kind for kind in needs if not present[kind]]
    if missing:
        kinds = " and no ".join(f"{kind}s" for kind in missing)
        raise Day2Error(
            f"{where}: the dump has no {kinds}, which {command} reads (every cluster has some, so the dump was "
            f"written without them); {_WRITE_AGAIN}"
        )


def parse_dump_text(text: str, where: str) -> Any:
    """The dump's JSON; an empty file, a YAML dump and a cut-off one each get their own message."""
    if not text.strip():
        raise Day2Error(f"{where}: the file is empty; {_WRITE_AGAIN}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if _YAML_START.match(text.lstrip()):
            raise Day2Error(f"{where}: this is YAML (kubectl -o yaml); the tool reads JSON: {_WRITE_AGAIN}") from None
        # Valid up to where the text stops: the parser failed at the very end, or inside a string never closed.
        at_end = error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string")
        if at_end and _cut_off(text):
            raise Day2Error(
                f"{where}: the JSON stops at line {error.lineno} before the document ends (cut off: an interrupted "
                f"kubectl or a full disk); {_WRITE_AGAIN}"
            ) from None
        raise Day2Error(f"{where}: not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None


def _cut_off(text: str) -> bool:
    """True when the text ends inside a string or with brackets still open: the end of the dump is missing."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            escaped, in_string = (not escaped and char == "\\"), in_string and (escaped or char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return in_string or depth > 0


def load_dump(path: str, needs: tuple[str, ...] = (), command: str = "") -> Snapshot:
    """Read a dump file, or standard input for `-`. Raises Day2Error naming the file and the problem."""
    where = f"--from {path}"
    try:
        text = sys.stdin.read() if path == "-" else read_utf8(Path(path))
    except OSError as error:
        raise Day2Error(f"{where}: cannot read it: {error.strerror or error}") from None
    except NotUtf8Error as error:
        raise Day2Error(f"{where}: {error}") from None
    except UnicodeDecodeError:
        raise Day2Error(f"{where}: not UTF-8 text") from None
    snapshot = snapshot_from_document(parse_dump_text(text, where), where)
    require_kinds(snapshot, needs, where, command)
    return snapshot


def load_live(
    kubeconfig: str | None, context: str | None, *, namespaces: bool = False, reclaim: bool = False
) -> Snapshot:
    """List nodes, pods, configmaps and jobs across namespaces through the one client (node/kube.py) over the
    official client's kubeconfig handling (day2/kube_client.py); with `reclaim`, also the ResourceQuotas and the
    Kubeflow Notebooks (`claims --reclaimable`: none where the cluster has no Notebook CRD, a 404).

    kubeconfig/context None: kubectl's defaults (KUBECONFIG, ~/.kube/config, its current context).
    """
    kube, server = connect(kubeconfig, context)
    kinds = (
        ("Node", "/api/v1/nodes"),
        ("Pod", "/api/v1/pods"),
        ("ConfigMap", "/api/v1/configmaps"),
        ("Job", "/apis/batch/v1/jobs"),
        # Their Kubeflow profile owner annotation, for `claims --usage` only: the other commands need no right to
        # list namespaces.
        *((("Namespace", "/api/v1/namespaces"),) if namespaces else ()),
        *((("ResourceQuota", "/api/v1/resourcequotas"), ("Notebook", notebooks_path())) if reclaim else ()),
    )
    items: list[JsonObject] = []
    for kind, path in kinds:
        try:
            items += kube.list(path, kind)
        except ApiError as error:
            if error.status is None:
                raise Day2Error(f"cannot reach the API server {server}: {str(error).rsplit(': ', 1)[-1]}") from None
            reason = str(error).split(f": {error.status} ", 1)[-1].split(":", 1)[0].strip()
            raise Day2Error(f"the API server {server} refused to list {kind}s: {error.status} {reason}") from None
    return Snapshot.from_items(items)
