"""Stack config `gpu-pool:gpuOperator`: the NVIDIA GPU Operator chart, its driver and its RKE2 runtime wiring.

Every trap fix of the article's annotated values file is either a typed field here (driver pin,
driver and DCGM exporter resources, RKE2 containerd paths) or fixed by the values builder
(`components/gpu_platform/operator_values.py`) and protected against being undone through `extraValues`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.base import ConfigModel, nearest
from config.chart_source import ChartSourceError, LocalChart, read_local_chart
from config.chart_values_guard import GUARDED_KEYS, leaf_paths, overlaps
from config.earlier_file import waived
from config.errors import SECRET_VALUE_ERROR
from config.plain_credentials import has_userinfo
from config.quantities import ComputeQuantities, ResourceRequirements
from config.validators import own_namespace
from knowledge.driver_matrix import driver_problem, is_branch
from knowledge.gpu_operator_chart import CHART_NAME, DEAD_KEYS, KNOWN_CHART_SECTIONS, SECTIONS_SINCE
from knowledge.gpu_operator_values import unknown_keys, values_tree
from knowledge.rke2 import RKE2_CONTAINERD_SOCKET

_SEMVER_TAG = re.compile(r"^v\d+\.\d+\.\d+$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_DRIVER_VERSION = re.compile(r"^\d+(?:\.\d+){1,2}$")
_DRIVER_BRANCH = re.compile(r"^\d+$")


def _chart_key(version: str) -> tuple[int, ...]:
    """`v26.7.0` -> (26, 7, 0), for ordering chart versions; () for a malformed one (refused elsewhere)."""
    parts = version.removeprefix("v").split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _driver_resources_default() -> ResourceRequirements:
    # Article trap: 512Mi OOM-kills (exit 137) the driver container while gcc compiles nvidia.ko.
    return ResourceRequirements(limits=ComputeQuantities(cpu="2", memory="4Gi"))


def _dcgm_exporter_resources_default() -> ResourceRequirements:
    # Article trap: 256Mi OOM-kills the exporter right after it loads its whole field set.
    return ResourceRequirements(limits=ComputeQuantities(memory="1Gi"))


def _over_default(value: Any, default: ResourceRequirements) -> Any:
    """A resources block as given, over the default one: `limits: {memory: 8Gi}` keeps the default CPU limit,
    where replacing the block would drop it silently; `cpu: null` removes a default on purpose."""
    if not isinstance(value, Mapping):
        return value
    base = default.model_dump(by_alias=True)
    merged: dict[str, Any] = dict(value)
    for section, quantities in base.items():
        given = value.get(section)
        if section in value and not isinstance(given, Mapping):
            continue  # a mistake (a scalar, null): the model says what is wrong with it
        merged[section] = {**{k: v for k, v in quantities.items() if v is not None}, **(given or {})}
    return merged


# Settings earlier gpu-pool versions had under gpuOperator.toolkit, and why they are gone: a stack file that
# still sets one is told what happened instead of "unknown key".
REMOVED_TOOLKIT_KEYS: Final[Mapping[str, str]] = {
    "containerdConfig": (
        "RKE2 regenerates containerd's config.toml at every start and drops the toolkit's import of its "
        "drop-in file, so CONTAINERD_CONFIG had no effect; RKE2 registers the nvidia runtime itself once the "
        "toolkit is installed (rke2-docs add-ons/gpu_operators.md sets only the socket). Remove the key"
    ),
    "runtimeClass": (
        "the RuntimeClass must name a handler RKE2 registers itself (nvidia), so it is fixed. Remove the key"
    ),
    "setAsDefault": (
        "nvidia as containerd's default runtime cannot be set through the toolkit on RKE2 (RKE2 regenerates the "
        "config) and is not needed: with CDI, containerd injects the GPU into any pod that requests "
        "nvidia.com/gpu with the default runtime. RKE2's own switch is `default-runtime` in its config.yaml. "
        "Remove the key"
    ),
}


def _known_at_every_depth(values: Mapping[str, Any], chart_version: str | None) -> None:
    """A key the pinned chart does not read, below the top level too: Helm renders it silently and the
    feature is just not there after `up`. Keys inside pass-through maps (labels, env, resources...) are free."""
    tree = values_tree(chart_version) if chart_version else None
    if tree is None:
        return
    for path, siblings in unknown_keys(tree, values):
        parent, _, key = path.rpartition(".")
        suggestion = nearest(key, siblings)
        hint = f"; did you mean '{parent}.{suggestion}'?" if suggestion else f" (it has: {', '.join(siblings)})"
        raise ValueError(f"'{path}' is not a value of the gpu-operator chart {chart_version}{hint}")


class ToolkitConfig(ConfigModel):
    """Where the NVIDIA container toolkit finds RKE2's containerd (the chart's `toolkit.env`)."""

    containerd_socket: str = Field(
        default=RKE2_CONTAINERD_SOCKET,
        description="containerd socket; RKE2 runs its own containerd, and only its socket is accepted",
    )

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in REMOVED_TOOLKIT_KEYS.items():
                if key not in data:
                    continue
                if not waived(f"gpu-pool:gpuOperator.toolkit.{key}: '{key}' was removed: {why}"):
                    raise PydanticCustomError("removed_key", "'{key}' was removed: {why}", {"key": key, "why": why})
                data = {k: v for k, v in data.items() if k != key}
        return data

    @field_validator("containerd_socket")
    @classmethod
    def _socket_is_rke2s(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path on the node, e.g. " + RKE2_CONTAINERD_SOCKET)
        # RKE2's kubelet talks to RKE2's own containerd, at this socket alone (rke2-docs add-ons/gpu_operators.md
        # sets CONTAINERD_SOCKET to it). Any other path (a host containerd's /run/containerd/containerd.sock)
        # makes the toolkit configure a containerd the kubelet never uses: 'no runtime for "nvidia" is
        # configured' on the node, after the operator's 30-minute wait.
        if value.rstrip("/") != RKE2_CONTAINERD_SOCKET:
            raise ValueError(
                f"{value} is not the containerd RKE2's kubelet uses: RKE2 runs its own containerd at "
                f"{RKE2_CONTAINERD_SOCKET} (its GPU Operator guide sets exactly that), and a toolkit pointed "
                "elsewhere leaves 'no runtime for \"nvidia\" is configured'; remove the key (the default is "
                "RKE2's socket)"
            )
        return RKE2_CONTAINERD_SOCKET


# A chart value named like a credential (a key ending so: `password`, `apiKey`, `token`...), not a Secret's name.
_CREDENTIAL_KEY = re.compile(r"(password|passwd|passphrase|token|apikey|api_key|secret|credentials?)$", re.IGNORECASE)
_SECRET_NAME_KEYS = frozenset({"imagepullsecrets"})


def credential_paths(values: Any, prefix: str = "") -> Iterator[str]:
    """Each path of extraValues that holds a credential: a non-empty text under a key named like one, or a URL with
    a login (`user:password@`) anywhere, list items included (`driver.env[0].value`)."""
    if isinstance(values, Mapping):
        for key, value in values.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            named = _CREDENTIAL_KEY.search(str(key)) and str(key).lower() not in _SECRET_NAME_KEYS
            if named and isinstance(value, str) and value:
                yield path
            else:
                yield from credential_paths(value, path)
    elif isinstance(values, list):
        for index, item in enumerate(values):
            yield from credential_paths(item, f"{prefix}[{index}]")
    elif isinstance(values, str) and has_userinfo(values):
        yield prefix


class GpuOperatorConfig(ConfigModel):
    """The NVIDIA GPU Operator Helm release: chart pin, driver, operand resources, RKE2 toolkit wiring."""

    chart_version: str = Field(
        default="v26.7.0",
        description=(
            "gpu-operator chart version, pinned as vX.Y.Z: v26.7.0 (the supported line); the article's v26.3.2 "
            "is accepted with a warning (deprecated upstream)"
        ),
        json_schema_extra={"pattern": _SEMVER_TAG.pattern},
    )
    chart_repository: str = Field(
        default="https://helm.ngc.nvidia.com/nvidia", description="Helm repository of the chart (https)"
    )
    chart: str | None = Field(
        default=None,
        description=(
            "the chart on disk instead of the repository: a .tgz made by `helm pull`/`helm package` (or a chart "
            "directory), relative to the project directory; its Chart.yaml version must be chartVersion. "
            "With it, the chart's CRDs are registered as resources (`make chart` fetches one)"
        ),
    )
    namespace: str = Field(default="gpu-operator", description="namespace of the release and its operands")
    driver_version: str = Field(
        default="595.91.07",
        description="NVIDIA driver the operator builds; a branch such as '580' when usePrecompiled",
        json_schema_extra={"pattern": r"^\d+(\.\d+){0,2}$"},
    )
    kernel_module_type: Literal["auto", "open", "proprietary"] = Field(
        default="auto", description="open or proprietary kernel modules; auto tries open first"
    )
    use_precompiled: bool = Field(
        default=False,
        description="use NVIDIA's precompiled modules instead of building from source (few distros/kernels)",
    )
    allow_unsupported_driver: bool = Field(
        default=False,
        description="accept a driver (or chart) that is not in gpu-pool's compatibility table",
    )
    driver_resources: ResourceRequirements = Field(
        default_factory=_driver_resources_default,
        description="driver container resources; the module compile needs about 4Gi",
    )
    dcgm_exporter_resources: ResourceRequirements = Field(
        default_factory=_dcgm_exporter_resources_default,
        description="DCGM exporter resources; it needs about 1Gi once its field set is loaded",
    )
    toolkit: ToolkitConfig = Field(
        default_factory=ToolkitConfig, description="container toolkit settings for RKE2's containerd"
    )
    extra_values: dict[str, Any] = Field(
        default_factory=dict,
        description="further chart values, deep-merged last; may not undo a value gpu-pool sets to prevent a trap",
    )

    @field_validator("driver_resources", mode="before")
    @classmethod
    def _driver_resources_over_default(cls, value: Any) -> Any:
        return _over_default(value, _driver_resources_default())

    @field_validator("dcgm_exporter_resources", mode="before")
    @classmethod
    def _dcgm_resources_over_default(cls, value: Any) -> Any:
        return _over_default(value, _dcgm_exporter_resources_default())

    @field_validator("chart_version")
    @classmethod
    def _chart_version_is_pinned(cls, value: str) -> str:
        if not _SEMVER_TAG.match(value):
            raise ValueError(
                "must pin an exact chart release as vX.Y.Z, e.g. v26.3.2: an unpinned chart lets the "
                "operator and its validator change underneath your values (the article's "
                "'nvidia-validator: command not found, exit 127' version skew)"
            )
        return value

    @field_validator("chart_repository")
    @classmethod
    def _repository_is_https(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.netloc:
            raise ValueError("must be an https:// Helm repository URL, e.g. https://helm.ngc.nvidia.com/nvidia")
        return value

    @field_validator("chart")
    @classmethod
    def _chart_is_the_pinned_local_chart(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        pinned = info.data.get("chart_version")
        try:
            found = read_local_chart(Path(value))
        except ChartSourceError as error:
            raise ValueError(f"{error}; name a chart archive from `make chart` or `helm pull`") from None
        if found.name != CHART_NAME:
            raise ValueError(f"'{value}' is the chart '{found.name}', not {CHART_NAME}")
        if pinned is not None and found.version.removeprefix("v") != pinned.removeprefix("v"):
            raise ValueError(
                f"'{value}' is {CHART_NAME} {found.version}, not the pinned chartVersion {pinned}"
                + (
                    " (a chart from git says v1.0.0-devel until NVIDIA's release stamps it: "
                    f"`helm package --version {pinned} --app-version {pinned} <dir>` makes the archive to name)"
                    if found.version.endswith("-devel")
                    else f"; set chartVersion: {found.version} or name the {pinned} archive (`make chart`)"
                )
            )
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace_is_dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a DNS label: lowercase letters, digits and '-', at most 63 characters")
        return own_namespace(value, "gpu-operator")

    @field_validator("driver_version")
    @classmethod
    def _driver_version_shape(cls, value: str) -> str:
        if not (_DRIVER_VERSION.match(value) or _DRIVER_BRANCH.match(value)):
            raise ValueError("must be an NVIDIA driver version such as 580.173.02 (or a branch such as 580)")
        return value

    @field_validator("extra_values")
    @classmethod
    def _extra_values_cannot_undo_trap_fixes(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        credential = next(credential_paths(value), None)
        if credential is not None:
            # Raised without the value: Helm values are stored in the release and copied into the ClusterPolicy, both
            # readable in clear (config/secrets.py CREDENTIALS, "a password in the chart's extra values").
            raise PydanticCustomError(
                SECRET_VALUE_ERROR,
                f"'{credential}' holds a credential (value not shown): the chart's values are kept in clear in the "
                "Helm release and the ClusterPolicy; put it in a Kubernetes Secret and give the chart that Secret's "
                "name (a proxy's login: gpu-pool:proxy.login and the secret gpu-pool:proxyAuth; docs/secrets.md)",
            )
        pinned = str(info.data.get("chart_version", ""))
        for section in value:
            since = SECTIONS_SINCE.get(section)
            if since and pinned and _chart_key(pinned) < _chart_key(since):
                raise ValueError(f"'{section}' is a section of the chart since {since}; chart {pinned} never reads it")
        for path, _ in leaf_paths(value):
            for dead, reason in DEAD_KEYS.items():
                if path == dead or path.startswith(dead + "."):
                    raise ValueError(f"'{path}' does nothing: {reason}")
        for section in value:
            if section not in KNOWN_CHART_SECTIONS:
                suggestion = nearest(section, list(KNOWN_CHART_SECTIONS))
                hint = f"; did you mean '{suggestion}'?" if suggestion else ""
                raise ValueError(f"'{section}' is not a top-level section of the gpu-operator chart values{hint}")
        for path, leaf in leaf_paths(value):
            for guarded, why in GUARDED_KEYS.items():
                if overlaps(path, leaf, guarded):
                    raise ValueError(
                        f"'{path}' would override {guarded}, which gpu-pool sets to prevent {why.trap}; "
                        f"use {why.instead}"
                    )
        _known_at_every_depth(value, info.data.get("chart_version"))
        return value

    def local_chart(self) -> LocalChart | None:
        """The chart on disk the release installs (validated at load), None when it comes from the repository."""
        return read_local_chart(Path(self.chart)) if self.chart is not None else None

    @model_validator(mode="after")
    def _driver_fits_build_mode_and_chart(self) -> GpuOperatorConfig:
        if self.use_precompiled and not is_branch(self.driver_version):
            raise ValueError(
                f"usePrecompiled: true needs driverVersion to be a driver branch such as "
                f"'{self.driver_version.split('.')[0]}' (precompiled driver images are published per branch "
                f"and kernel), not the release {self.driver_version}"
            )
        if not self.use_precompiled and is_branch(self.driver_version):
            raise ValueError(
                f"driverVersion '{self.driver_version}' is a branch, which only precompiled images use; "
                "building from source needs a full version such as 580.173.02 (or set usePrecompiled: true)"
            )
        problem = driver_problem(self.chart_version, self.driver_version)
        if problem and not self.allow_unsupported_driver:
            raise ValueError(f"{problem}. To pin it anyway, set allowUnsupportedDriver: true")
        return self
