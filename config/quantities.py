"""Kubernetes resource quantities ("4Gi", "500m") and container requests/limits in the stack config."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from knowledge.quantities import QUANTITY, parse_quantity


def cpu_quantity(value: str | None) -> str | None:
    """A CPU amount above zero ("2", "500m"), or None."""
    return _check_quantity(value, "cpu")


def _check_quantity(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if not QUANTITY.match(value):
        raise ValueError(f"must be a Kubernetes {what} quantity such as {'2 or 500m' if what == 'cpu' else '4Gi'}")
    if parse_quantity(value) <= 0:
        raise ValueError(f"must be a {what} quantity above zero")
    return value


class ComputeQuantities(ConfigModel):
    """CPU and memory amounts of a container's requests or limits."""

    cpu: str | None = Field(default=None, description="CPU quantity, e.g. '2' or '500m'; unset leaves it open")
    memory: str | None = Field(default=None, description="memory quantity, e.g. '4Gi'; unset leaves it open")

    @field_validator("cpu")
    @classmethod
    def _cpu_is_quantity(cls, value: str | None) -> str | None:
        return _check_quantity(value, "cpu")

    @field_validator("memory")
    @classmethod
    def _memory_is_quantity(cls, value: str | None) -> str | None:
        return _check_quantity(value, "memory")

    def as_values(self) -> dict[str, str]:
        """Only the quantities that are set, in Kubernetes' own key order."""
        return {key: value for key, value in (("cpu", self.cpu), ("memory", self.memory)) if value is not None}


class ResourceRequirements(ConfigModel):
    """Requests and limits of an operand container (the chart's `<operand>.resources`)."""

    requests: ComputeQuantities = Field(
        default_factory=ComputeQuantities, description="what the scheduler reserves on the node"
    )
    limits: ComputeQuantities = Field(default_factory=ComputeQuantities, description="where the container is killed")

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceRequirements:
        # Kubernetes rejects such a pod at creation, so the DaemonSet would show no pods at all.
        for name in ("cpu", "memory"):
            request, limit = getattr(self.requests, name), getattr(self.limits, name)
            if request is not None and limit is not None and parse_quantity(request) > parse_quantity(limit):
                raise ValueError(
                    f"requests.{name} ({request}) is more than limits.{name} ({limit}); Kubernetes refuses such a pod"
                )
        return self

    def as_values(self) -> dict[str, dict[str, str]]:
        """The chart's resources block; empty sections left out."""
        blocks = {"limits": self.limits.as_values(), "requests": self.requests.as_values()}
        return {key: block for key, block in blocks.items() if block}
