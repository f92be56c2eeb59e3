"""The project's name and folder, written once: the `name:` of Pulumi.yaml, which is the namespace of every config
key (`gpu-pool:rke2`), the prefix a stack file's short keys get, and the day-2 command's name.

A constant, not read from Pulumi.yaml at import: the day-2 command and the health check's code run where there is
no Pulumi.yaml (tests/config/test_project.py checks the two agree).
"""

from __future__ import annotations

from pathlib import Path

PROJECT = "gpu-pool"
# A config key of this project: `gpu-pool:<key>`.
PREFIX = f"{PROJECT}:"
ROOT_DIR = Path(__file__).resolve().parent.parent
