"""The digest of everything that renders into the GPU Operator's driver DaemonSet's pod template (knowledge/
driver_template.py says what, and from which upstream files), and the ConfigMaps the driver container mounts.

Any change to that template gives the DaemonSet a new ControllerRevision, and the operator then puts every GPU node
in `upgrade-required` (k8s-operator-libs common_manager.go). With the program's `maxUnavailable: "0"` it moves only a
cordoned node (upgrade_inplace.go): so every such change, not only a driver version change, must be a wave, one
domain at a time (FIELD-REVIEW-6 WRONG-1). The digest is what each domain's rollout state records for it
(components/gpu_failure_domain/rollout.py); nothing outside the template may move it, or a DCGM exporter or device
plugin change would drain every GPU node for nothing.

The ConfigMaps the driver mounts (repoConfig: the apt sources; certConfig: the lab CA) are mounted per key with
subPath (object_controls.go createConfigMapVolumeMounts), so a new content never reaches a running driver: their
content's digest goes into the driver container's env (DRIVER_MOUNTS_ENV), which changes the template, as the DCGM
exporter's metrics digest does for its CSV (operator_values.DCGM_METRICS_DIGEST_ANNOTATION).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.gpu_platform.apt_sources import build_apt_sources_configmap
from components.gpu_platform.release_values import driver_proxy, release_values
from components.gpu_platform.trusted_ca import build_trusted_ca_configmap
from config.proxmox import CODENAME_OF
from config.proxy import AptMirrorConfig
from config.stack import StackConfig
from knowledge.driver_template import (
    DRIVER_TEMPLATE_SECTIONS,
    NOT_IN_TEMPLATE,
    ONLY_WHEN_ENABLED,
    OPERATOR_IMAGE_KEYS,
)

# The guest OS a stack without one names (the proxmox model sets it from the cloud image or requires it).
_DEFAULT_GUEST_OS = "ubuntu-24.04"


def driver_configmaps(
    apt_mirror: AptMirrorConfig | None, guest_os: str | None, trusted_ca: str | None, namespace: str
) -> dict[str, dict[str, Any]]:
    """The ConfigMaps the operator mounts into the driver container, by the platform's resource suffix: the lab's
    apt sources (driver.repoConfig) and its CA (driver.certConfig), each only where the stack asks for it."""
    found: dict[str, dict[str, Any]] = {}
    if apt_mirror is not None:
        codename = CODENAME_OF[guest_os or _DEFAULT_GUEST_OS]
        found["apt-sources"] = build_apt_sources_configmap(apt_mirror, codename, namespace)
    if trusted_ca is not None:
        found["trusted-ca"] = build_trusted_ca_configmap(trusted_ca, namespace)
    return found


def mounts_digest(configmaps: Sequence[Mapping[str, Any]]) -> str | None:
    """The content of the ConfigMaps the driver mounts, as one digest; None where it mounts none."""
    if not configmaps:
        return None
    content = sorted(
        ([str(c["metadata"]["name"]), dict(c.get("data") or {}), dict(c.get("binaryData") or {})] for c in configmaps),
        key=lambda item: str(item[0]),
    )
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def driver_template_inputs(values: Mapping[str, Any], chart_version: str) -> dict[str, Any]:
    """What of the release (its chart version and final values) renders into the driver's pod template."""
    inputs: dict[str, Any] = {"chart": chart_version}
    for section in DRIVER_TEMPLATE_SECTIONS:
        if section in values:
            inputs[section] = copy.deepcopy(values[section])
    for path in NOT_IN_TEMPLATE:
        section, key = path.split(".", 1)
        if isinstance(inputs.get(section), dict):
            inputs[section].pop(key, None)
    for path in ONLY_WHEN_ENABLED:
        *parents, key = path.split(".")
        holder: Any = inputs
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        # Disabled or absent render the same (TransformDriver: nil or not enabled), so a disabled one is dropped.
        if isinstance(holder, dict) and isinstance(holder.get(key), dict) and not holder[key].get("enabled"):
            del holder[key]
    operator = values.get("operator")
    if isinstance(operator, Mapping):
        image = {key: operator[key] for key in OPERATOR_IMAGE_KEYS if key in operator}
        if image:
            inputs["operator"] = image
    return inputs


def driver_template_digest(values: Mapping[str, Any], chart_version: str) -> str:
    """12 hex digits of the template's inputs: short, as the rollout state's other digests, and written on Nodes."""
    encoded = json.dumps(driver_template_inputs(values, chart_version), sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:12]


def stack_release_values(stack: StackConfig, *, crds_registered: bool | None = None) -> dict[str, Any]:
    """The gpu-operator release's values for a whole stack: what GpuPlatform installs (component.py) and what each
    domain's rollout state digests (one function, so the two can never differ)."""
    operator = stack.gpu_operator
    mounted = driver_configmaps(stack.apt_mirror, stack.proxmox.guest_os, stack.trusted_ca, operator.namespace)
    return release_values(
        operator,
        stack.kyverno,
        stack.monitoring,
        crds_registered=crds_registered,
        driver_env=driver_proxy(stack.proxy, stack.rke2)[0],
        driver_secret_env=driver_proxy(stack.proxy, stack.rke2)[1],
        repo_config=mounted["apt-sources"]["metadata"]["name"] if "apt-sources" in mounted else None,
        cert_config=mounted["trusted-ca"]["metadata"]["name"] if "trusted-ca" in mounted else None,
        driver_mounts_digest=mounts_digest(list(mounted.values())),
    )


def stack_driver_template(stack: StackConfig) -> str:
    """The digest a domain of this stack records for the driver's pod template once its turn is done."""
    # Whether the program registers the chart's CRDs moves only operator.upgradeCRD, which the template does not
    # carry: said outright, so that the digest never reads a chart on disk.
    values = stack_release_values(stack, crds_registered=False)
    return driver_template_digest(values, stack.gpu_operator.chart_version)
