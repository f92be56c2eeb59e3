"""Stack config `gpu-pool:gpuOperator`: the NVIDIA GPU Operator chart, its driver and its RKE2 runtime wiring.

Every trap fix of the article's annotated values file is either a typed field here (driver pin,
driver and DCGM exporter resources, RKE2 containerd paths) or fixed by the values builder
(`components/gpu_operator_values.py`) and protected against being undone through `extraValues`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, Final, Literal, NamedTuple
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from components.driver_compatibility import driver_problem, is_branch
from config.base import ConfigModel, nearest

RKE2_CONTAINERD_CONFIG: Final = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
RKE2_CONTAINERD_SOCKET: Final = "/run/k3s/containerd/containerd.sock"

# Top-level keys of the gpu-operator v26.3.2 chart's values.yaml (our own list; the contract test
# checks it against the pinned chart). `extraValues` may only touch these sections.
KNOWN_CHART_SECTIONS: Final[tuple[str, ...]] = (
    "platform",
    "nfd",
    "psa",
    "cdi",
    "sandboxWorkloads",
    "hostPaths",
    "daemonsets",
    "validator",
    "operator",
    "mig",
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
    "vgpuManager",
    "vgpuDeviceManager",
    "vfioManager",
    "kataManager",
    "sandboxDevicePlugin",
    "kataSandboxDevicePlugin",
    "ccManager",
    "extraObjects",
    "node-feature-discovery",
)

# Keys the chart no longer reads (or never read where people put them): setting them changes
# nothing, so a value there is a mistake that looks like a fix.
DEAD_KEYS: Final[Mapping[str, str]] = {
    "operator.defaultRuntime": (
        "the operator no longer reads it (the ClusterPolicy CRD marks it deprecated: the container "
        "runtime is detected at run time); point the toolkit at RKE2's containerd with gpuOperator.toolkit"
    ),
    "psp": (
        "PodSecurityPolicy is gone from Kubernetes and the chart no longer reads psp; "
        "Pod Security is set on the gpu-operator namespace"
    ),
    "driver.useOpenKernelModules": "it is deprecated and ignored; use gpuOperator.kernelModuleType",
    "nfd.master": (
        "the NFD subchart reads its settings from node-feature-discovery.master; nfd.master is silently ignored"
    ),
    "nfd.worker": (
        "the NFD subchart reads its settings from node-feature-discovery.worker; nfd.worker is silently ignored"
    ),
}


class GuardedKey(NamedTuple):
    """A chart value the program sets to prevent a trap, and where the user controls it instead."""

    trap: str
    instead: str


# Chart values the program sets to prevent one of the article's traps. `extraValues` must not
# override them, or the escape hatch would quietly re-open the trap.
GUARDED_KEYS: Final[Mapping[str, GuardedKey]] = {
    "driver.version": GuardedKey(
        "a driver the chart does not support (the article's 570.133.20 and its NVML bug)",
        "gpuOperator.driverVersion, which is checked against the chart's supported drivers",
    ),
    "driver.kernelModuleType": GuardedKey(
        "the wrong kernel module flavour for the card", "gpuOperator.kernelModuleType"
    ),
    "driver.usePrecompiled": GuardedKey(
        "\"failed to install nvidia kernel module: distro 'ubuntu24.04' not supported\"",
        "gpuOperator.usePrecompiled",
    ),
    "driver.resources": GuardedKey(
        "the driver OOM-killed (exit 137) while compiling the kernel module", "gpuOperator.driverResources"
    ),
    "cdi.enabled": GuardedKey(
        "'Failed to initialize NVML: Driver/library version mismatch' after RKE2 regenerates config.toml",
        "nothing: CDI stays on",
    ),
    "cdi.nriPluginEnabled": GuardedKey(
        "the experimental NRI plugin, which needs containerd 2.1", "nothing: the NRI plugin stays off"
    ),
    "toolkit.env": GuardedKey(
        "'no runtime for \"nvidia\" is configured' (RKE2's containerd socket) and the nvidia runtime "
        "lost after a reboot (config.toml.tmpl)",
        "gpuOperator.toolkit",
    ),
    "operator.runtimeClass": GuardedKey(
        "a RuntimeClass whose handler containerd does not know ('no runtime for \"nvidia\" is configured')",
        "gpuOperator.toolkit.runtimeClass",
    ),
    "daemonsets.tolerations": GuardedKey(
        "the device plugin Pending on tainted GPU nodes ('Insufficient nvidia.com/gpu'): Helm replaces the whole list",
        "nothing: the list already tolerates the nvidia.com/gpu taint",
    ),
    "node-feature-discovery.master.tolerations": GuardedKey(
        "NFD's master without its control-plane toleration, which never labels a node",
        "nothing: the list already tolerates the control-plane taint",
    ),
    "devicePlugin.config": GuardedKey(
        "the device plugin pointed at a ConfigMap that does not exist yet (a card drops from 1 to 0 GPUs)",
        "gpu-pool's sharing profiles, whose ConfigMap is created before the release",
    ),
    "dcgmExporter.resources": GuardedKey(
        "the DCGM exporter OOM-killed right after 'DCGM successfully initialized!'",
        "gpuOperator.dcgmExporterResources",
    ),
    "dcgmExporter.config": GuardedKey(
        "dashboards and alerts querying metrics the exporter no longer emits",
        "gpu-pool's DCGM metrics settings",
    ),
}

_SEMVER_TAG = re.compile(r"^v\d+\.\d+\.\d+$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_DRIVER_VERSION = re.compile(r"^\d+(?:\.\d+){1,2}$")
_DRIVER_BRANCH = re.compile(r"^\d+$")
# Kubernetes resource.Quantity, unsigned (the ClusterPolicy CRD's pattern without the sign).
_QUANTITY = re.compile(
    r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?$"
)
_BINARY_SUFFIX: Final[Mapping[str, int]] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIX: Final[Mapping[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}


def parse_quantity(text: str) -> Decimal:
    """The numeric value of a Kubernetes quantity ("4Gi" -> 4294967296, "500m" -> 0.5)."""
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not a Kubernetes quantity")
    number = Decimal(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIX:
        return number * (Decimal(1024) ** _BINARY_SUFFIX[suffix])
    if suffix in _DECIMAL_SUFFIX:
        return number.scaleb(_DECIMAL_SUFFIX[suffix])
    return number.scaleb(int(Decimal(suffix[1:])))


def _check_quantity(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if not _QUANTITY.match(value):
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


def _driver_resources_default() -> ResourceRequirements:
    # Article trap: 512Mi OOM-kills (exit 137) the driver container while gcc compiles nvidia.ko.
    return ResourceRequirements(limits=ComputeQuantities(cpu="2", memory="4Gi"))


def _dcgm_exporter_resources_default() -> ResourceRequirements:
    # Article trap: 256Mi OOM-kills the exporter right after it loads its whole field set.
    return ResourceRequirements(limits=ComputeQuantities(memory="1Gi"))


class ToolkitConfig(ConfigModel):
    """Where the NVIDIA container toolkit finds RKE2's containerd (the chart's `toolkit.env`)."""

    containerd_config: str = Field(
        default=RKE2_CONTAINERD_CONFIG,
        description="containerd config the toolkit edits: RKE2's generated config.toml, never the .tmpl",
    )
    containerd_socket: str = Field(
        default=RKE2_CONTAINERD_SOCKET,
        description="containerd socket; RKE2 runs its own containerd under /run/k3s",
    )
    runtime_class: str = Field(
        default="nvidia",
        description="name of the containerd runtime handler and of its Kubernetes RuntimeClass",
    )
    set_as_default: bool = Field(
        default=True,
        description="make nvidia the node's default runtime, so GPU pods need no runtimeClassName",
    )

    @field_validator("containerd_config")
    @classmethod
    def _generated_config_not_template(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path on the node, e.g. " + RKE2_CONTAINERD_CONFIG)
        if value.lower().endswith(".tmpl"):
            raise ValueError(
                "must be RKE2's generated config.toml, not the .tmpl template: the toolkit re-applies "
                "itself to the generated file after every restart, while a toolkit pointed at the template "
                "leaves the live config without the nvidia runtime after a reboot until rke2-agent is "
                "restarted by hand (gpu-operator#992, #623); use " + RKE2_CONTAINERD_CONFIG
            )
        return value

    @field_validator("containerd_socket")
    @classmethod
    def _socket_is_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path on the node, e.g. " + RKE2_CONTAINERD_SOCKET)
        return value

    @field_validator("runtime_class")
    @classmethod
    def _runtime_class_is_dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a DNS label (lowercase letters, digits, '-'), e.g. nvidia")
        return value


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every dotted leaf path of a Helm values tree with its value.

    Non-empty mappings are descended into; anything else (scalars, None, lists, empty mappings) is a
    leaf: Helm replaces a list as a whole, so a list item counts as the list's path.
    """
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path)
        else:
            yield path, value


def _overlaps(path: str, value: Any, guarded: str) -> bool:
    if path == guarded or path.startswith(guarded + "."):
        return True
    # A non-mapping value above a guarded key replaces (or, as null, deletes) the whole section.
    # An empty mapping merges to nothing in Helm, so it touches nothing.
    return guarded.startswith(path + ".") and not (isinstance(value, Mapping) and not value)


class GpuOperatorConfig(ConfigModel):
    """The NVIDIA GPU Operator Helm release: chart pin, driver, operand resources, RKE2 toolkit wiring."""

    chart_version: str = Field(
        default="v26.3.2",
        description="gpu-operator chart version, pinned as vX.Y.Z (the article's pin is v26.3.2)",
    )
    chart_repository: str = Field(
        default="https://helm.ngc.nvidia.com/nvidia", description="Helm repository of the chart (https)"
    )
    namespace: str = Field(default="gpu-operator", description="namespace of the release and its operands")
    driver_version: str = Field(
        default="580.173.02",
        description="NVIDIA driver the operator builds; a branch such as '580' when usePrecompiled",
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

    @field_validator("namespace")
    @classmethod
    def _namespace_is_dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a DNS label: lowercase letters, digits and '-', at most 63 characters")
        return value

    @field_validator("driver_version")
    @classmethod
    def _driver_version_shape(cls, value: str) -> str:
        if not (_DRIVER_VERSION.match(value) or _DRIVER_BRANCH.match(value)):
            raise ValueError("must be an NVIDIA driver version such as 580.173.02 (or a branch such as 580)")
        return value

    @field_validator("extra_values")
    @classmethod
    def _extra_values_cannot_undo_trap_fixes(cls, value: dict[str, Any]) -> dict[str, Any]:
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
                if _overlaps(path, leaf, guarded):
                    raise ValueError(
                        f"'{path}' would override {guarded}, which gpu-pool sets to prevent {why.trap}; "
                        f"use {why.instead}"
                    )
        return value

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
