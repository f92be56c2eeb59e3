"""The Nodes an earlier stack file's `up` leaves (`make diff` writes them as `nodes.json`), apart from the reader
of Nodes (observed.py) because they are built from the stack's config: the reader runs in the cluster without it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.gpu_failure_domain.node_metadata import node_labels
from components.gpu_failure_domain.observed import ROLLOUT_ANNOTATION, node_document
from components.shared.node_marking import GpuNodeMarking
from config.stack import StackConfig


def settled_nodes(stack: StackConfig, rollout: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The Nodes a stack's `up` leaves: every worker serving, its labels and taint, its kubelet on the pinned RKE2
    and its kernel on the pin (empty where none), the state rolled out to (`rollout`, by domain) recorded."""
    marking = GpuNodeMarking.from_kyverno(stack.kyverno)
    items = [
        node_document(
            domain.hostname,
            labels=node_labels(domain, marking),
            annotations={
                ROLLOUT_ANNOTATION: json.dumps(dict(rollout[domain.name]), sort_keys=True, separators=(",", ":"))
            },
            kubelet=stack.rke2.version,
            kernel=domain.kernel or "",
            gpus=stack.slots(domain),
            taints=[
                {"key": marking.taint_key, "value": marking.taint_value, "effect": marking.taint_effect},
            ],
        )
        for domain in stack.failure_domains
    ]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
