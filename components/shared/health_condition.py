"""The Node condition the in-cluster health check writes (day2/doctor/health_check.py) and its alert reads
(components/gpu_platform/health_check.py): one name for both, node/'s (node/vocabulary.py HEALTH_CONDITION)."""

from __future__ import annotations

from node.vocabulary import HEALTH_CONDITION

# True: every floor doctor checks in the cluster is ok; False: the reason names the lowest broken floor.
CONDITION = HEALTH_CONDITION
