"""`gpu-pool:rke2` and `gpu-pool:kubernetes`: the cluster the GPU workers join and the API the stack talks to."""

from __future__ import annotations

import ipaddress
import os
import re
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.earlier_file import waived
from config.validators import https_url
from knowledge.rke2 import ALL_RELEASES_CONTAINERD_2_FROM, FIRST_CONTAINERD_2_RELEASE

RKE2_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\+rke2r(\d+)$")


def _release(version: str) -> tuple[int, ...]:
    match = RKE2_VERSION.match(version)
    assert match is not None
    return tuple(int(part) for part in match.groups())


def containerd_problem(version: str) -> str | None:
    """Why an RKE2 release cannot run the CDI-based GPU Operator (its containerd is older than 2.0), or None."""
    release = _release(version)
    minor = (release[0], release[1])
    if minor >= ALL_RELEASES_CONTAINERD_2_FROM:
        return None
    need = (
        "the CDI-based GPU Operator needs containerd 2.0: on containerd 1.7 the device plugin's CDI devices are "
        "never injected and GPU pods run without a GPU"
    )
    first = FIRST_CONTAINERD_2_RELEASE.get(minor)
    if first is None:
        oldest = min(FIRST_CONTAINERD_2_RELEASE.values(), key=_release)
        return (
            f"no RKE2 v{minor[0]}.{minor[1]} release ships containerd 2.0, and {need}; "
            f"pin {oldest} or later (or any v1.33+ release)"
        )
    if release >= _release(first):
        return None
    line = f"v{minor[0]}.{minor[1]}"
    return f"ships containerd 1.7, and {need}; the first release on the {line} line with containerd 2.0 is {first}"


# RKE2's install script, which the first boot and the upgrade step run (RKE2 docs, "Quick start").
DEFAULT_INSTALL_SCRIPT = "https://get.rke2.io"


def _download_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not a download URL: write https://<host>/<path>, as curl fetches it")
    if parts.query or parts.fragment:
        raise ValueError(f"{value!r} has a query or fragment: the install script appends its own paths")
    return value.rstrip("/")


# The last part of a release folder's URL (`v1.33.5+rke2r1`, `v1.33.5%2Brke2r1`) or of a file in it.
_RELEASE_FOLDER = re.compile(r"^v\d+\.\d+\.\d+(\+|%2[bB])rke2r\d+$")
_RELEASE_FILE = re.compile(r"^(rke2[.-].*\.(tar\.gz|tar\.zst)|sha256sum-[a-z0-9]+\.txt|install\.sh)$")


def _artifacts_prefix(value: str | None) -> str | None:
    """`artifacts` is the folder that holds the release folders: install.sh appends `/<version>/<file>` itself, so
    a URL of the release's own folder or of a file in it becomes `.../v1.33.5%2Brke2r1/v1.33.5%2Brke2r1/...`: 404."""
    url = _download_url(value)
    if url is None:
        return None
    parts = url.split("/")
    if _RELEASE_FOLDER.match(parts[-1]):
        return_to = "/".join(parts[:-1])
        raise ValueError(
            f"{value!r} is the release's own folder, and install.sh appends /<version>/<file> itself (404): "
            f"write {return_to}"
        )
    if _RELEASE_FILE.match(parts[-1]):
        folder = parts[:-2] if len(parts) > 4 and _RELEASE_FOLDER.match(parts[-2]) else parts[:-1]
        raise ValueError(
            f"{value!r} is a file, and artifacts is the folder that holds the release folders (install.sh appends "
            f"/<version>/<file> itself): write {'/'.join(folder)}"
        )
    return url


class Rke2InstallerConfig(ConfigModel):
    """Where the first boot and the upgrade step get RKE2 from (docs/air-gap.md): the install script, and the
    release files the pinned install script downloads (INSTALL_RKE2_ARTIFACT_URL, install.sh at v1.33.5+rke2r1:
    `<artifacts>/<version, + as %2B>/sha256sum-<arch>.txt` and `rke2.linux-<arch>.tar.gz`, as GitHub's releases
    lay them out; an agent pulls its images from the registries)."""

    script: str = Field(
        default=DEFAULT_INSTALL_SCRIPT,
        description="URL of RKE2's install.sh (default https://get.rke2.io); a copy on a lab server for a lab with no "
        "route out",
    )
    artifacts: str | None = Field(
        default=None,
        description="URL prefix of the RKE2 release files, laid out as github.com/rancher/rke2/releases/download: "
        "<artifacts>/v1.33.5%2Brke2r1/sha256sum-amd64.txt and rke2.linux-amd64.tar.gz (INSTALL_RKE2_ARTIFACT_URL); "
        "default: GitHub's releases",
    )

    _script = field_validator("script")(classmethod(lambda cls, v: _download_url(v)))
    _artifacts = field_validator("artifacts")(classmethod(lambda cls, v: _artifacts_prefix(v)))


class Rke2Config(ConfigModel):
    server_url: str = Field(
        description="RKE2 supervisor URL the agents register with, https://<server>:9345",
        json_schema_extra={"pattern": "^https://[^/]+:9345/?$"},
    )
    version: str = Field(
        description="pinned RKE2 release, e.g. v1.33.5+rke2r1 (must match the servers; v1.31.6, v1.32.2 or any "
        "v1.33+ release: the GPU Operator needs containerd 2.0)",
        json_schema_extra={"pattern": RKE2_VERSION.pattern},
    )

    cluster_cidr: str = Field(
        default="10.42.0.0/16",
        description="the cluster's pod CIDR, as the servers' cluster-cidr (RKE2's default); kept off the proxy",
    )
    service_cidr: str = Field(
        default="10.43.0.0/16",
        description="the cluster's service CIDR, as the servers' service-cidr (RKE2's default); kept off the proxy",
    )

    installer: Rke2InstallerConfig = Field(
        default_factory=Rke2InstallerConfig,
        description="where the RKE2 install script and release files are downloaded from (an installer mirror)",
    )

    @field_validator("cluster_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        if "/" not in value:
            # ip_network reads a bare address as a /32: NO_PROXY would keep one address of the cluster off the
            # proxy, and every other pod and service address would go to it.
            raise ValueError(
                f"{value!r} has no prefix length, which reads as a single address (/32): write the servers' CIDR, "
                f"e.g. {value}/16"
            )
        try:
            network = ipaddress.ip_network(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a CIDR with its network address, e.g. 10.42.0.0/16 (as the servers' config.yaml)"
            ) from None
        return str(network)

    @field_validator("server_url")
    @classmethod
    def _server_url(cls, value: str) -> str:
        url = https_url(value, port=9345)
        parts = urlsplit(url)
        if parts.path.strip("/") or parts.query:
            # The agent appends its own paths (/cacerts, /v1-rke2/...) to the server URL: a path of its own makes
            # every one of them a 404 and the node never joins.
            raise ValueError(f"must be the server alone, https://{parts.netloc} (the agent adds its own paths)")
        return url

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
        problem = containerd_problem(value)
        if problem and not waived(f"gpu-pool:rke2.version: {value} {problem}"):
            raise ValueError(problem)
        return value


class KubernetesConfig(ConfigModel):
    kubeconfig: str | None = Field(
        default=None,
        description="kubeconfig path (~ and relative paths are expanded); default: kubectl's own (KUBECONFIG, "
        "~/.kube/config)",
    )
    context: str | None = Field(default=None, description="kubeconfig context; default: the current context")
    adopt_existing: bool = Field(
        default=False,
        description="let the plan take over objects it creates that the cluster already has (pulumi-kubernetes' "
        "upsertExistingObjects; each preview's cluster check names them, and without this refuses them, as "
        "pulumi-kubernetes does at `up`); once adopted they are the stack's, and `pulumi destroy` deletes them. "
        "Turn it off after the `up` that adopted",
    )

    @field_validator("kubeconfig")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # Every kubectl step gets the path quoted, where no shell expands `~`, and runs from wherever
        # pulumi-command starts it: only an absolute path means the same file everywhere.
        if value is None:
            return None
        if not value:
            raise ValueError("is empty: leave it out to use kubectl's default, or give the path of a kubeconfig file")
        return os.path.abspath(os.path.expanduser(value))
