"""`gpu-pool:smokeTest`: the CUDA vector-add Job that proves each domain's whole GPU chain works."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.validators import own_namespace

# The article's proof: NVIDIA's CUDA sample, pinned by tag.
ARTICLE_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
# The label every smoke Job and its pod carry: with the namespace, what exempts them from the multi-GPU rule (a
# multi-card domain's Job asks for its cards on whatever profile the domain has).
SMOKE_APP_LABEL = ("app.kubernetes.io/name", "cuda-smoke-test")
PINNED_IMAGE = re.compile(r"^[a-z0-9.\-/:_]+(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}|@sha256:[0-9a-f]{64})$")


class SmokeTestConfig(ConfigModel):
    enabled: bool = Field(default=True, description="run the CUDA smoke test Job on every domain's node")
    image: str = Field(default=ARTICLE_IMAGE, description="CUDA vector-add image, pinned by tag or digest")
    namespace: str = Field(default="gpu-smoke-test", description="namespace for the Jobs (Pod Security restricted)")
    timeout_seconds: int = Field(
        default=600,
        ge=60,
        le=7200,
        description="how long a Job may run (image pull included) once its node is ready, before it fails",
    )
    gpu_ready_timeout_minutes: int = Field(
        default=45,
        ge=5,
        le=240,
        description="how long to wait for the node to advertise its GPUs on the pinned driver before the Job "
        "starts; the first driver build (image pull, headers, compiling nvidia.ko) happens in this wait",
    )

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: own_namespace(v, "gpu-smoke-test")))

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        last = value.rsplit("/", 1)[-1]
        if ":" not in last and "@" not in last:
            raise ValueError("must be pinned by tag or digest, e.g. " + ARTICLE_IMAGE)
        if last.endswith(":latest"):
            raise ValueError("':latest' is not a pin: the test must re-run when its image changes, not drift")
        if not PINNED_IMAGE.match(value):
            raise ValueError("is not an image reference")
        return value
