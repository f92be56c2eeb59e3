"""The contract between the two halves: what a failure domain waits for on the platform."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi


@dataclass
class PlatformHandles:
    """What a failure domain waits on: its profile's ConfigMap, the operator, the smoke-test namespace."""

    time_slicing_config: pulumi.Resource
    operator: pulumi.Resource
    smoke_namespace: pulumi.Resource | None
    steering_policy: pulumi.Resource | None
