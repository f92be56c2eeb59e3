"""Recording rules per node and card: the `gpu-pool.cards` group of the GPU PrometheusRule, what the notebook reclaim
policy and `gpu-pool claims --reclaimable` judge a card by (day2/reclaim/evidence.py).

The shipped usage rules (usage_rules.py) are per namespace and per node: enough for GPU-hours, not to say which card a
pod holds when a node has several. These keep each card apart, named as Kubernetes names its node:

- `node_gpu:gpu_pool_card_utilisation:max{node, gpu, UUID}`: the card's GPU utilisation (percent), from DCGM under
  either field and node-label name (knowledge/metric_names.py dcgm_series).
- `node_gpu_pod:gpu_pool_card_holder:group{node, gpu, UUID, namespace, pod}`: 1 for the pod dcgm-exporter names on the
  card (its `exported_*` labels behind the operator's ServiceMonitor, else its own). On a time-sliced card the
  exporter names one of the pods sharing it (KUBERNETES_VIRTUAL_GPUS false, its default), so this says who holds a
  whole card, never everyone on a shared one.

The group's interval is fixed, so a window of H hours holds H*60 samples when the card was seen all of it:
`count_over_time` of the utilisation says how much of a window is evidence (a series that began inside the window is
not evidence for all of it).
"""

from __future__ import annotations

from typing import Any, Final

from components.gpu_platform.usage_rules import holder_labels
from knowledge.metric_names import DCGM_GPU_UTIL, DCGM_NODE_LABEL, dcgm_series

CARD_GROUP_NAME: Final = "gpu-pool.cards"
CARD_INTERVAL: Final = "1m"
CARD_INTERVAL_SECONDS: Final = 60

CARD_UTILISATION: Final = "node_gpu:gpu_pool_card_utilisation:max"
CARD_HOLDER: Final = "node_gpu_pod:gpu_pool_card_holder:group"
CARD_RECORDED: Final = (CARD_UTILISATION, CARD_HOLDER)
CARD_LABELS: Final = ("node", "gpu", "UUID")


def _utilisation_with_node() -> str:
    """DCGM's utilisation series with the node in `node`, as kube-state-metrics and the Node name it."""
    return f'label_replace({dcgm_series(DCGM_GPU_UTIL)}, "node", "$1", "{DCGM_NODE_LABEL}", "(.+)")'


def card_utilisation() -> str:
    return f"max by ({', '.join(CARD_LABELS)}) ({_utilisation_with_node()})"


def card_holder() -> str:
    return f"group by ({', '.join(CARD_LABELS)}, namespace, pod) ({holder_labels(_utilisation_with_node())})"


def build_card_group() -> dict[str, Any]:
    return {
        "name": CARD_GROUP_NAME,
        "interval": CARD_INTERVAL,
        "rules": [
            {"record": CARD_UTILISATION, "expr": card_utilisation()},
            {"record": CARD_HOLDER, "expr": card_holder()},
        ],
    }
