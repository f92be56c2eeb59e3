"""Turning validation failures into one clear line per mistake, each naming its config key."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import ValidationError

NAMESPACE = "gpu-pool"


class ConfigError(Exception):
    """Raised before any resource is registered; carries every message, one per mistake."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))


def key_path(loc: Iterable[int | str]) -> str:
    """`("failureDomains", 1, "gpu", "pciAddress")` -> `gpu-pool:failureDomains[1].gpu.pciAddress`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = f"{NAMESPACE}:{part}"
    return path or NAMESPACE


_MODEL_CLASS = re.compile(r" or instance of \w+")


def _clean(msg: str) -> str:
    """Pydantic's wording without its internals (class names, error-kind prefixes)."""
    msg = _MODEL_CLASS.sub("", msg)
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def format_validation_error(error: ValidationError) -> list[str]:
    """One message per pydantic error: `<key path>: <what is wrong> (got <value>)`."""
    messages: list[str] = []
    for item in error.errors(include_url=False):
        loc = [part for part in item["loc"] if not (isinstance(part, str) and part.startswith("function-"))]
        ctx = item.get("ctx") or {}
        if item["type"] in ("unknown_key", "removed_key"):
            messages.append(f"{key_path([*loc, ctx['key']])}: {_clean(item['msg'])}")
            continue
        if item["type"] == "missing":
            messages.append(f"{key_path(loc)}: is required but not set")
            continue
        got = item.get("input")
        shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
        messages.append(f"{key_path(loc)}: {_clean(item['msg'])}{shown}")
    return messages
