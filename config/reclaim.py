"""`gpu-pool:reclaim`: the opt-in policies that give idle GPUs back. `idleNotebooks` stops a Kubeflow notebook whose
card DCGM saw idle for the whole window while others wait for one, the way Kubeflow stops it (docs/day2.md,
"Reclaim idle notebooks").

Its idle thresholds default to the GpuHeldWhileIdle alert's (`monitoring.thresholds`), so that what the alert names
is what the policy would stop; `gpu-pool claims --reclaimable` prints the same decisions before it is enabled.
"""

from __future__ import annotations

from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.base import ConfigModel
from config.errors import SECRET_VALUE_ERROR
from config.monitoring import AlertThresholds
from config.repair import WATCHER_IMAGE, pinned_image
from config.validators import label_key, own_namespace

_ALERT = AlertThresholds()
DEFAULT_EXCLUSION_LABEL = "gpu-pool.dev/keep-gpu"


def prometheus_url(value: str) -> str:
    """The base URL of the Prometheus that holds DCGM's series: http(s), a host, no credentials, query or fragment.

    Credentials in the URL are refused: they would sit in the stack file, the plan and the policy's Deployment in
    clear. A Prometheus that asks for a login gets it from the secret gpu-pool:prometheusAuth, which reaches the
    policy's container through a Kubernetes Secret (docs/secrets.md)."""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(
            "must be the http(s) URL of the Prometheus that scrapes DCGM, e.g. "
            "http://rancher-monitoring-prometheus.cattle-monitoring-system.svc:9090"
        )
    if parsed.username is not None or parsed.password is not None:
        # Raised without the value: the message must not spread the password it warns about.
        raise PydanticCustomError(
            SECRET_VALUE_ERROR,
            "must not carry credentials (user:password@, value not shown): they would be stored and shown in clear; "
            "write the URL without them and give the login as a secret: pulumi config set --secret "
            "gpu-pool:prometheusAuth 'user:password' (or 'Bearer <token>'; docs/secrets.md)",
        )
    if parsed.query or parsed.fragment:
        raise ValueError("must be Prometheus' base URL, without a query or fragment (the policy adds /api/v1/query)")
    return value.rstrip("/")


class IdleNotebooksConfig(ConfigModel):
    """Stop a Kubeflow Notebook that holds a GPU DCGM saw idle for the whole window, while a GPU pod waits or its
    namespace's GPU quota is full: an Event and an annotation first, then Kubeflow's own stop
    (`kubeflow-resource-stopped`: its controller scales the StatefulSet to 0, the volume and files stay), one at a
    time, and only once the previous stop's card is back. Nothing is ever deleted."""

    enabled: bool = Field(
        default=False,
        strict=True,
        description="run the policy in the cluster (off by default; `gpu-pool claims --reclaimable` shows what it "
        "would do)",
    )
    prometheus_url: str | None = Field(
        default=None,
        description="the Prometheus holding DCGM's series and gpu-pool's per-card recording rules, as the policy's "
        "pod reaches it (required when enabled), e.g. "
        "http://rancher-monitoring-prometheus.cattle-monitoring-system.svc:9090",
    )
    idle_hours: int = Field(
        default=_ALERT.idle_gpu_hours,
        ge=1,
        le=24 * 30,
        strict=True,
        description="a notebook is idle when every card its pod holds stayed below idleUtilisationPercent for this "
        "many hours, all of which its pod held the card (default: the GpuHeldWhileIdle alert's)",
    )
    idle_utilisation_percent: int = Field(
        default=_ALERT.idle_utilisation_percent,
        ge=1,
        le=99,
        strict=True,
        description="DCGM GPU utilisation (percent) a card's peak must stay below over the window to count as idle "
        "(default: the GpuHeldWhileIdle alert's)",
    )
    only_when_contended: bool = Field(
        default=True,
        strict=True,
        description="stop only while a pod is Pending for nvidia.com/gpu that the freed slots would let schedule, "
        "or the notebook's namespace has its GPU quota full",
    )
    grace_minutes: int = Field(
        default=60,
        ge=0,
        le=7 * 24 * 60,
        strict=True,
        description="an Event and an annotation on the Notebook first, naming when it will be stopped and how to "
        "keep it; stopped only when it is still idle and wanted after this (0: no warning)",
    )
    exclusion_label: str = Field(
        default=DEFAULT_EXCLUSION_LABEL,
        description="a Notebook, or a namespace, labelled <this>=true is never stopped: how an owner keeps a card",
    )
    max_per_hour: int = Field(
        default=2,
        ge=1,
        le=60,
        strict=True,
        description="notebooks the policy may stop in any hour, counted from the stops it recorded on the Notebooks",
    )
    dry_run: bool = Field(
        default=False,
        strict=True,
        description="report each decision (log and metrics) and change nothing: no annotation, Event or stop",
    )
    check_every_minutes: int = Field(
        default=5, ge=1, le=60, strict=True, description="how often the policy looks at the notebooks"
    )
    card_back_minutes: int = Field(
        default=15,
        ge=1,
        le=24 * 60,
        strict=True,
        description="a stopped notebook's pod still holding its card this long after the stop is reported "
        "(metric and GpuNotebookCardNotBack alert, with its finalizers); no other notebook is stopped meanwhile",
    )
    image: str = Field(
        default=WATCHER_IMAGE,
        description="an image with python3 (3.11 or newer) on PATH, pinned by tag or digest; the stack hands the "
        "policy its code in a ConfigMap",
    )
    namespace: str = Field(
        default="gpu-pool-reclaim", description="namespace the stack creates for the policy (Pod Security restricted)"
    )

    _image = field_validator("image")(classmethod(lambda cls, v: pinned_image(v)))
    _namespace = field_validator("namespace")(classmethod(lambda cls, v: own_namespace(v, "gpu-pool-reclaim")))
    _label = field_validator("exclusion_label")(classmethod(lambda cls, v: label_key(v)))

    @field_validator("prometheus_url")
    @classmethod
    def _prometheus(cls, value: str | None) -> str | None:
        return None if value is None else prometheus_url(value)

    @model_validator(mode="after")
    def _enabled_needs_prometheus(self) -> IdleNotebooksConfig:
        # Without the series the policy could only guess; a missing series is "unknown", never "idle", so an
        # enabled policy without a Prometheus would sit in the cluster stopping nothing, holding a patch right.
        if self.enabled and self.prometheus_url is None:
            raise ValueError(
                "reclaim.idleNotebooks.enabled is true but reclaim.idleNotebooks.prometheusUrl is not set: the policy "
                "judges idleness from DCGM's series; give the URL of the Prometheus that scrapes DCGM, e.g. "
                "http://rancher-monitoring-prometheus.cattle-monitoring-system.svc:9090"
            )
        return self


class ReclaimConfig(ConfigModel):
    idle_notebooks: IdleNotebooksConfig = Field(
        default_factory=IdleNotebooksConfig,
        description="stop a Kubeflow notebook that holds an idle GPU while others wait for one (off by default)",
    )
