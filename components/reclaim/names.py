"""The names the notebook reclaim policy and its Kubernetes objects share: what it writes on a Notebook, the metrics
it exports and the objects the stack creates for it. Standard library only: the policy's code in the cluster
(day2/reclaim/) imports it, and so do the builders (components/reclaim/objects.py).

Every annotation key holds "notebook": Kubeflow's controller copies a Notebook's annotations into its pod template
except those whose key contains "kubectl" or "notebook" (notebook_controller.go generateStatefulSet, v1.11.0), so
these stay on the Notebook and never reach the pod a restart creates.
"""

from __future__ import annotations

from typing import Final

NAME: Final = "gpu-pool-reclaim"
# Who stops: the Events' source component and the value of RECLAIMED_BY.
COMPONENT: Final = "gpu-pool-reclaim"
CODE_CONFIGMAP: Final = "gpu-pool-reclaim-code"
METRICS_PORT: Final = 9401

_PREFIX: Final = "notebooks.gpu-pool.dev/"
# The warning: when it was given and when the notebook will be stopped if it is still idle and wanted.
WARNED_AT: Final = f"{_PREFIX}reclaim-warned-at"
STOP_AFTER: Final = f"{_PREFIX}reclaim-stop-after"
# The stop, beside Kubeflow's own `kubeflow-resource-stopped` (which gets the same time): who, when, why, what it
# held and for how long, and what DCGM saw. RECLAIMED_AT equal to the stop annotation's value is how a stop is
# known to be gpu-pool's (an owner who restarts and stops again writes another time).
RECLAIMED_AT: Final = f"{_PREFIX}reclaimed-at"
RECLAIMED_BY: Final = f"{_PREFIX}reclaimed-by"
RECLAIMED_WHY: Final = f"{_PREFIX}reclaimed-why"
RECLAIMED_POD: Final = f"{_PREFIX}reclaimed-pod"
RECLAIMED_NODE: Final = f"{_PREFIX}reclaimed-node"
RECLAIMED_GPUS: Final = f"{_PREFIX}reclaimed-gpus"
RECLAIMED_HELD_HOURS: Final = f"{_PREFIX}reclaimed-held-hours"
RECLAIMED_PEAK_PERCENT: Final = f"{_PREFIX}reclaimed-peak-utilisation-percent"
ANNOTATIONS: Final = (
    WARNED_AT,
    STOP_AFTER,
    RECLAIMED_AT,
    RECLAIMED_BY,
    RECLAIMED_WHY,
    RECLAIMED_POD,
    RECLAIMED_NODE,
    RECLAIMED_GPUS,
    RECLAIMED_HELD_HOURS,
    RECLAIMED_PEAK_PERCENT,
)

# Event reasons on the Notebook (`kubectl describe notebook` lists them).
EVENT_WARNED: Final = "GpuReclaimWarning"
EVENT_WITHDRAWN: Final = "GpuReclaimWithdrawn"
EVENT_STOPPED: Final = "GpuReclaimed"

# Metrics (served on METRICS_PORT /metrics).
# Counter, by namespace: notebooks the policy stopped.
STOPS: Final = "gpu_pool_reclaim_notebooks_stopped_total"
# Counter: GPU-hours freed, physical GPUs (a time slice counts as its share of the card) times the hours the stopped
# notebooks stayed stopped with their card back, added at every pass.
FREED_GPU_HOURS: Final = "gpu_pool_reclaim_freed_gpu_hours_total"
# Gauge, by node: cards the last pass could not judge because a time-sliced card is shared with a pod that is not a
# notebook, or its cards disagree.
AMBIGUOUS_CARDS: Final = "gpu_pool_reclaim_ambiguous_cards"
# Gauge, by reason and action: the last pass's decisions.
DECISIONS: Final = "gpu_pool_reclaim_decisions"
# Gauge, by namespace, notebook, pod, node, phase and finalizers: seconds since the policy stopped a notebook whose
# pod still holds its card (the GpuNotebookCardNotBack alert compares it with cardBackMinutes).
NOT_BACK_SECONDS: Final = "gpu_pool_reclaim_card_not_back_seconds"
# Gauge: when the last pass ended (unix seconds), and 1 while the policy only reports (dryRun).
LAST_PASS: Final = "gpu_pool_reclaim_last_pass_timestamp_seconds"
DRY_RUN: Final = "gpu_pool_reclaim_dry_run"
# Counter: passes that could not judge (Prometheus or the API server did not answer).
PASS_ERRORS: Final = "gpu_pool_reclaim_pass_errors_total"
METRICS: Final = (STOPS, FREED_GPU_HOURS, AMBIGUOUS_CARDS, DECISIONS, NOT_BACK_SECONDS, LAST_PASS, DRY_RUN, PASS_ERRORS)
