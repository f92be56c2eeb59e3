"""The lab CA for the GPU Operator's driver container (`gpu-pool:trustedCa`), which downloads the kernel headers it
builds nvidia.ko against from the lab's apt mirror: an https mirror under the lab's CA is refused by apt otherwise.

NVIDIA's `driver.certConfig.name` names a ConfigMap in the operator's namespace; the operator mounts each of its keys
into the driver container's CA folder for its OS (gpu-operator v26.7.0 controllers/object_controls.go,
CertConfigPathMap["ubuntu"] = /usr/local/share/ca-certificates, createConfigMapVolumeMounts: one subPath mount per
key). The key ends in `.crt`, the only files update-ca-certificates reads there.
"""

from __future__ import annotations

from typing import Any

TRUSTED_CA_CONFIGMAP = "gpu-pool-trusted-ca"
TRUSTED_CA_KEY = "gpu-pool-trusted-ca.crt"


def build_trusted_ca_configmap(bundle: str, namespace: str) -> dict[str, Any]:
    """The v1 ConfigMap `driver.certConfig` names, in the operator's namespace (the operator reads it there)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TRUSTED_CA_CONFIGMAP, "namespace": namespace},
        "data": {TRUSTED_CA_KEY: bundle},
    }
