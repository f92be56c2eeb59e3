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

# The containerd each RKE2 line ships, from its first to its newest release: the component tables of the release
# notes (rancher/rke2-docs `docs/release-notes/v1.3X.X.md` at 9477b7b1, 2026-08-20; the k3s builds of containerd,
# e.g. v2.2.6-k3s1), and v1.36.4 from its release candidate's Dockerfile (rancher/rke2 tag v1.36.4-rc1+rke2r1
# @ d9ca309c: `rancher/hardened-containerd:v2.3.4-k3s1.36`). No v1.37 release or candidate existed in either
# repository then, so no containerd is claimed for it.
RKE2_LINE_CONTAINERD: Final[Mapping[tuple[int, int], tuple[str, str, str, str]]] = {
    # line: (first release, its containerd, newest release, its containerd)
    (1, 33): ("v1.33.0+rke2r1", "v2.0.4", "v1.33.13+rke2r2", "v2.2.6"),
    (1, 34): ("v1.34.1+rke2r1", "v2.1.4", "v1.34.10+rke2r1", "v2.2.6"),
    (1, 35): ("v1.35.0+rke2r1", "v2.1.5", "v1.35.7+rke2r1", "v2.2.6"),
    (1, 36): ("v1.36.0+rke2r1", "v2.2.3", "v1.36.4+rke2r1", "v2.3.4"),
}
# The RKE2 minors the supported GPU Operator line (26.7) is tested on: NVIDIA/cloud-native-docs
# gpu-operator/platform-support.rst at 52dcb7b8 (2026-08-21), "Rancher Kubernetes Engine 2: 1.33---1.36" for Ubuntu
# 22.04, 24.04 and 26.04.
GPU_OPERATOR_RKE2_MINORS: Final = ((1, 33), (1, 36))
