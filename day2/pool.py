"""What the tool checks a cluster against: the stack's GPU nodes, labels, taint and namespaces.

Without `--stack` the defaults of the stack config models apply (the article's lab: label nodepool=gpu, taint
nvidia.com/gpu=true:NoSchedule, namespaces gpu-operator and gpu-smoke-test) and nothing is expected per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from day2.errors import Day2Error

if TYPE_CHECKING:
    from config.stack import StackConfig

# What components/gpu_failure_domain/smoke_test.py labels each smoke Job with (a test keeps the two equal).
SMOKE_JOB_NAME_LABEL = "app.kubernetes.io/name"
SMOKE_JOB_NAME = "cuda-smoke-test"
SMOKE_JOB_DOMAIN_LABEL = "gpu-pool/domain"


@dataclass(frozen=True)
class Domain:
    """One failure domain of the stack: its node and the sharing profile that node should carry."""

    name: str
    hostname: str
    sharing: str
    slots: int
    # Every card's vendor:device id, in the stack's order (node-check's report is re-checked against them).
    cards: tuple[str, ...] = ()


# The defaults come from the stack config's models, imported only when a default is needed: the in-cluster
# health check (day2/doctor/health_check.py) gives every value and runs on the standard library, without pydantic.
def _operator_namespace() -> str:
    from config.gpu_operator import GpuOperatorConfig

    return GpuOperatorConfig().namespace


def _smoke_namespace() -> str:
    from config.smoke_test import SmokeTestConfig

    return SmokeTestConfig().namespace


def _time_slicing_configmap() -> str:
    from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP

    return TIME_SLICING_CONFIGMAP


def _idle_hours() -> int:
    from config.monitoring import AlertThresholds

    return AlertThresholds().idle_gpu_hours


def _idle_percent() -> int:
    from config.monitoring import AlertThresholds

    return AlertThresholds().idle_utilisation_percent


@dataclass(frozen=True)
class PoolFacts:
    marking: GpuNodeMarking = ARTICLE_MARKING
    operator_namespace: str = field(default_factory=_operator_namespace)
    smoke_namespace: str = field(default_factory=_smoke_namespace)
    # False when the stack turns the smoke test off: then no smoke Job is expected on any node.
    smoke_test_enabled: bool = True
    time_slicing_configmap: str = field(default_factory=_time_slicing_configmap)
    domains: tuple[Domain, ...] = ()
    profile_slots: dict[str, int] = field(default_factory=dict)
    driver_version: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    idle_hours: int = field(default_factory=_idle_hours)
    idle_percent: int = field(default_factory=_idle_percent)
    stack: str | None = None

    def domain_of(self, node: str) -> Domain | None:
        return next((d for d in self.domains if d.hostname == node), None)

    def expected_slots(self) -> dict[str, int] | None:
        """Node name -> slots its profile promises; None without a stack (nothing is expected)."""
        return {d.hostname: d.slots for d in self.domains} if self.stack else None


def load_stack(stack: str, root: Path) -> PoolFacts:
    """Read and validate Pulumi.<stack>.yaml in root. Raises Day2Error with one line naming the problem."""
    return facts_of(read_stack(stack, root), stack)


def read_stack(stack: str, root: Path) -> StackConfig:
    """Pulumi.<stack>.yaml in root, validated (its secrets are not read). Raises Day2Error naming the problem."""
    # Imported here: reading a stack pulls in the config models and the builders its rendered rules run, which
    # dump-only runs (and the in-cluster health check) never need.
    from components.stack_check import validate_stack_file
    from config.errors import ConfigError
    from config.stack_file import StackFileError

    try:
        return validate_stack_file(stack, root)
    except StackFileError as error:
        raise Day2Error(f"--stack {stack}: {error}") from None
    except ConfigError as error:
        raise Day2Error(f"--stack {stack}: Pulumi.{stack}.yaml is not valid: {'; '.join(error.messages)}") from None


def facts_of(cfg: StackConfig, stack: str) -> PoolFacts:
    """What doctor and claims check a cluster against, from a validated stack: the facts the stack writes for its
    health check (components/gpu_platform/health_check.py, one derivation from the config) and where the cluster
    and its usage thresholds are."""
    from components.gpu_platform.health_check import pool_facts_document

    return replace(
        facts_from_document(pool_facts_document(cfg, stack)),
        kubeconfig=cfg.kubernetes.kubeconfig,
        context=cfg.kubernetes.context,
        idle_hours=cfg.monitoring.thresholds.idle_gpu_hours,
        idle_percent=cfg.monitoring.thresholds.idle_utilisation_percent,
    )


def facts_from_document(document: Mapping[str, Any]) -> PoolFacts:
    return PoolFacts(
        marking=GpuNodeMarking.from_document(document["marking"]),
        operator_namespace=document["operatorNamespace"],
        smoke_namespace=document["smokeNamespace"],
        smoke_test_enabled=bool(document["smokeTestEnabled"]),
        time_slicing_configmap=document["timeSlicingConfigMap"],
        domains=tuple(
            Domain(d["name"], d["hostname"], d["sharing"], int(d["slots"]), tuple(d.get("cards") or ()))
            for d in document["domains"]
        ),
        profile_slots={str(k): int(v) for k, v in document["profileSlots"].items()},
        driver_version=document.get("driverVersion"),
        stack=document.get("stack"),
        # Not read by doctor's floors; given so that no default reaches for the config models.
        idle_hours=0,
        idle_percent=0,
    )
