"""What RKE2 provides to the GPU stack: where its containerd lives, and which releases can run it."""

from __future__ import annotations

from typing import Final

RKE2_CONTAINERD_CONFIG: Final = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
RKE2_CONTAINERD_SOCKET: Final = "/run/k3s/containerd/containerd.sock"
# CDI needs containerd 1.7 or newer, or the toolkit writes /etc/cdi/nvidia.yaml and containerd never reads
# it: pods schedule and nvidia-smi hangs (the article's CDI trap). Every RKE2 line from v1.30 ships
# containerd 1.7 or 2.x; the older lines are end of life.
MINIMUM_RKE2: Final = (1, 30)
