"""`gpu-pool:rke2` and `gpu-pool:kubernetes`: the cluster the GPU workers join and the API the stack talks to."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.validators import https_url

RKE2_VERSION = re.compile(r"^v\d+\.\d+\.\d+\+rke2r\d+$")


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
        if not RKE2_VERSION.match(value):
            raise ValueError("is not an RKE2 release; expected vX.Y.Z+rke2rN, e.g. v1.33.5+rke2r1")
        return value


class KubernetesConfig(ConfigModel):
    kubeconfig: str | None = Field(default=None, description="kubeconfig path; default: the ambient kubeconfig")
    context: str | None = Field(default=None, description="kubeconfig context; default: the current context")
