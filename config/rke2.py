"""`gpu-pool:rke2` and `gpu-pool:kubernetes`: the cluster the GPU workers join and the API the stack talks to."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.validators import https_url
from knowledge.rke2 import MINIMUM_RKE2

RKE2_VERSION = re.compile(r"^v(\d+)\.(\d+)\.\d+\+rke2r\d+$")


class Rke2Config(ConfigModel):
    server_url: str = Field(description="RKE2 supervisor URL the agents register with, https://<server>:9345")
    version: str = Field(description="pinned RKE2 release, e.g. v1.33.5+rke2r1 (must match the servers)")

    @field_validator("server_url")
    @classmethod
    def _server_url(cls, value: str) -> str:
        return https_url(value, port=9345)

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value.lower() in {"latest", "stable", "testing"}:
            raise ValueError(
                f"'{value}' is a channel, not a version: a GPU node must run the release the servers run; "
                "pin one like v1.33.5+rke2r1"
            )
        match = RKE2_VERSION.match(value)
        if not match:
            raise ValueError("is not an RKE2 release; expected vX.Y.Z+rke2rN, e.g. v1.33.5+rke2r1")
        if (int(match[1]), int(match[2])) < MINIMUM_RKE2:
            raise ValueError(
                f"is older than v{MINIMUM_RKE2[0]}.{MINIMUM_RKE2[1]}: CDI (on, to survive RKE2 regenerating "
                "containerd's config) needs containerd 1.7+, or containerd never reads the CDI spec and "
                "nvidia-smi hangs in every GPU pod"
            )
        return value


class KubernetesConfig(ConfigModel):
    kubeconfig: str | None = Field(default=None, description="kubeconfig path; default: the ambient kubeconfig")
    context: str | None = Field(default=None, description="kubeconfig context; default: the current context")
