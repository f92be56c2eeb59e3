"""What RKE2 provides to the GPU stack: where its containerd lives, and which releases can run the operator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

RKE2_CONTAINERD_SOCKET: Final = "/run/k3s/containerd/containerd.sock"
# RKE2's agent registers these containerd runtime handlers when it finds the NVIDIA toolkit's binaries
# (k3s pkg/agent/containerd/runtimes.go), and its rke2-runtimeclasses chart creates RuntimeClasses for the
# first two. The operator's own RuntimeClass (operator.runtimeClass) must name one of them.
RKE2_NVIDIA_RUNTIMES: Final = ("nvidia", "nvidia-experimental", "nvidia-cdi")

# The CDI-based GPU Operator (v25.10 on, CDI on by default) needs containerd 2.0: on containerd 1.7 the
# device plugin's cdi-annotations/cdi-cri devices are not injected and GPU pods run without a GPU
# (rke2-docs add-ons/gpu_operators.md, v25.10.x tab: "It requires containerd 2.0"). RKE2 ships containerd
# 2.0 from v1.31.6+rke2r1 and v1.32.2+rke2r1 (rke2-docs advanced.md); every v1.33 and later release has it
# (the release notes' containerd column); the v1.30 line never did.
FIRST_CONTAINERD_2_RELEASE: Final[Mapping[tuple[int, int], str]] = {
    (1, 31): "v1.31.6+rke2r1",
    (1, 32): "v1.32.2+rke2r1",
}
# From this minor on, every release ships containerd 2.x.
ALL_RELEASES_CONTAINERD_2_FROM: Final = (1, 33)
