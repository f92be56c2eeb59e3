"""Rules on the rendered plan (the final Helm values, cloud-init and manifests), run with the cross-key rules.

The plan is rendered by the components' builders, which config may not import (the layers point down:
knowledge <- config <- components). So the components package registers its invariant pass here when it is
imported (components/__init__.py, which every program that builds the plan imports before it loads the config),
and the loader runs whatever is registered on the parts of the config that parse. Without the components (a tool
that only reads a stack file), nothing is registered and nothing is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config.cross_key import StackParts

RenderedCheck = Callable[["StackParts"], list[str]]
_CHECKS: list[RenderedCheck] = []


def register(check: RenderedCheck) -> None:
    """Add a pass over the rendered plan (once: registering the same function again does nothing)."""
    if check not in _CHECKS:
        _CHECKS.append(check)


def registered() -> tuple[RenderedCheck, ...]:
    return tuple(_CHECKS)


def rendered_problems(parts: StackParts) -> list[str]:
    return [problem for check in _CHECKS for problem in check(parts)]
