"""The floor no plan can beat: a Pulumi program that imports the SDKs gpu-pool uses and registers nothing.

The bench driver runs it through the same offline runner as `__main__.py` (mocks, config, stack resource,
plan writing), so the difference between the two is what the program itself costs.

SDK packages import their submodules lazily (`pulumi_kubernetes.core.v1` is only loaded when the program
touches it, and it is the largest import of all), so importing the top-level packages is a floor but not the
floor of this program. The driver lists the SDK modules a prod preview ends up loading in the environment
variable below, one per line; the baseline imports those too, and the floor is then the same imports.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pulumi
import pulumi_command
import pulumi_kubernetes
import pulumi_proxmoxve
import pydantic

SDK_MODULES_ENV = "GPU_POOL_BENCH_SDK_MODULES"
PACKAGES: tuple[ModuleType, ...] = (pulumi, pulumi_kubernetes, pulumi_proxmoxve, pulumi_command, pydantic)


def import_listed_modules(listing: str) -> list[ModuleType]:
    """Import every module named in `listing` (one per line; blank lines ignored)."""
    return [importlib.import_module(name) for name in (line.strip() for line in listing.splitlines()) if name]


LOADED: list[ModuleType] = [*PACKAGES, *import_listed_modules(os.environ.get(SDK_MODULES_ENV, ""))]
