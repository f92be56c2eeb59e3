"""Which driver branch a CUDA major version needs: a container built with CUDA 13 does not run on an R570 driver
("CUDA driver version is insufficient for CUDA runtime version"), whatever else is right on the node.

Source: NVIDIA, CUDA Compatibility, "Minor Version Compatibility", Table 1 "CUDA Toolkit 11.x, 12.x, and 13.x
Driver Version Ranges" (docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html): CUDA 13.x
needs a driver >= 580, 12.x >= 525, 11.x >= 450; a newer driver always runs an older CUDA (backward
compatibility).
"""

from __future__ import annotations

import re
from typing import Final

MINIMUM_BRANCH_FOR_CUDA_MAJOR: Final = {11: 450, 12: 525, 13: 580}
# NVIDIA's images name their CUDA release in the tag: cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04,
# cuda:13.0.1-base-ubuntu24.04.
_CUDA_IN_SAMPLE_TAG = re.compile(r"cuda(\d+)\.\d+")
_CUDA_IMAGE_TAG = re.compile(r"/cuda:(\d+)\.\d+")


def cuda_major_of_image(image: str) -> int | None:
    """The CUDA major version an NVIDIA image's tag names; None when the tag does not say."""
    tag = image.rsplit("@", 1)[0]
    match = _CUDA_IMAGE_TAG.search(tag) or _CUDA_IN_SAMPLE_TAG.search(tag.rsplit(":", 1)[-1])
    return int(match.group(1)) if match else None
