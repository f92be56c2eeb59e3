"""Turning validation failures into one clear line per mistake, each naming its config key and the fix."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from config.plain_credentials import without_userinfo
from config.project import PROJECT
from config.type_hints import EXPECTED, hint_for

NAMESPACE = PROJECT


class ConfigError(Exception):
    """Raised before any resource is registered; carries every message, one per mistake."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))


def domain_label(raw: Any, index: int) -> str:
    """How a failure domain is named in messages: by its `name` when it has a usable one, else by position."""
    if isinstance(raw, list) and index < len(raw) and isinstance(raw[index], Mapping):
        name = raw[index].get("name")
        names = [item.get("name") for item in raw if isinstance(item, Mapping)]
        if (
            isinstance(name, str)
            and re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name)
            and names.count(name) == 1
        ):
            return name
    return str(index)


def key_path(loc: Iterable[int | str], raw: Mapping[str, Any] | None = None) -> str:
    """`("failureDomains", 1, "gpu", "pciAddress")` -> `gpu-pool:failureDomains[dc2].gpu.pciAddress`."""
    path = ""
    node: Any = raw
    for part in loc:
        if isinstance(part, int):
            label = domain_label(node, part) if path.endswith("failureDomains") else str(part)
            path += f"[{label}]"
        elif path:
            path += f".{part}"
        else:
            path = f"{NAMESPACE}:{part}"
        node = _step(node, part)
    return path or NAMESPACE


def _step(node: Any, part: int | str) -> Any:
    if isinstance(part, int):
        return node[part] if isinstance(node, list) and part < len(node) else None
    return node.get(part) if isinstance(node, Mapping) else None


_MODEL_CLASS = re.compile(r" or instance of \w+")


def _clean(msg: str) -> str:
    """Pydantic's wording without its internals (class names, error-kind prefixes)."""
    msg = _MODEL_CLASS.sub("", msg)
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


SECRET_VALUE_ERROR = "secret_value"


def _sharing_is_a_profile(got: int | float, raw: Mapping[str, Any] | None) -> str:
    """`sharing: 2` meant two slots per card; sharing names a profile, whose replicas are the slots."""
    profiles = (raw or {}).get("sharingProfiles")
    names = sorted(str(name) for name in profiles) if isinstance(profiles, Mapping) else []
    defined = f"one of gpu-pool:sharingProfiles ({', '.join(names)})" if names else "a gpu-pool:sharingProfiles entry"
    count = int(got)
    matching = [
        str(name)
        for name, profile in (profiles.items() if isinstance(profiles, Mapping) else [])
        if isinstance(profile, Mapping) and profile.get("replicas") == count
    ]
    hint = (
        f"sharing: {matching[0]} ({count} slots per card)"
        if matching
        else f"define a profile with replicas: {count} (e.g. sharingProfiles: {{x{count}: {{replicas: {count}}}}}) and "
        f"write sharing: x{count}"
    )
    return (
        f"names a sharing profile, not a number of slots (got {got!r}): use {defined}; for {count} slots per card, "
        f"{hint}"
    )


# Pydantic's words for a few values a user writes for a reason pydantic cannot know, in the project's own: what the
# value means on the host or to the program, and the fix. (last key, pydantic's error type) -> message given the
# value; each is a case of tests/config/test_own_messages.py.
OwnMessage = Callable[[Any], str]
OWN_MESSAGES: Mapping[tuple[str, str], OwnMessage] = {
    ("iommuGroup", "greater_than_equal"): lambda got: (
        (
            "is -1, which is what Proxmox reports when IOMMU is off on the host: turn it on (intel_iommu=on or "
            "amd_iommu=on on the kernel command line, VT-d / AMD-Vi in the firmware), reboot, then copy the card's "
            "group from `pvesh get /nodes/<node>/hardware/pci --output-format json` (or `gpu-pool discover`)"
        )
        if got == -1
        else f"is {got}: an IOMMU group is 0 or more, as `pvesh get /nodes/<node>/hardware/pci` lists it"
    ),
    ("failureDomains", "too_short"): lambda got: (
        "is empty: list at least one failure domain (a Proxmox host and the GPU VM it runs); Pulumi.minimal.yaml "
        "has two to copy"
    ),
    ("gpus", "too_short"): lambda got: (
        "is empty: list each card the VM gets, one entry per card (or `gpu:` for a single card), as "
        "`gpu-pool discover` prints them"
    ),
    ("diskGiB", "less_than_equal"): lambda got: (
        f"is {got} GiB ({got / 1024:.0f} TiB), beyond any worker's root disk: diskGiB is in GiB; {got} MiB is "
        f"{got // 1024} GiB, written diskGiB: {got // 1024}"
        if isinstance(got, int)
        else f"is {got!r}: a number of GiB"
    ),
    ("cores", "greater_than_equal"): lambda got: (
        f"is {got}: a VM needs at least 1 vCPU; leave cores out for the default (8)"
    ),
    ("maxPerDay", "greater_than_equal"): lambda got: (
        f"is {got}, which would let `gpu-pool repair` never power-cycle a VM: give 1 to 24; to have no repairs, "
        "do not run `gpu-pool repair` (it only acts when asked)"
    ),
    ("sharing", "string_type"): lambda got: (
        "names one sharing profile, not a list of them: every card of a domain is shared the same way; write e.g. "
        "sharing: whole (a domain with cards shared differently is two domains)"
        if isinstance(got, list)
        else "names a sharing profile: write its name, e.g. sharing: whole"
    ),
}


def format_validation_error(
    error: ValidationError, raw: Mapping[str, Any] | None = None, model: type[BaseModel] | None = None
) -> list[str]:
    """One message per pydantic error: `<key path>: <what is wrong> (got <value>)[; <the fix>]`.

    With the raw input, failure domains are named by their `name`; with the model, a type mix-up (a YAML number
    where text is expected, a value where a map is) gets the shape to write instead.
    """
    messages: list[str] = []
    for item in error.errors(include_url=False):
        loc = [part for part in item["loc"] if not (isinstance(part, str) and part.startswith("function-"))]
        ctx = item.get("ctx") or {}
        if item["type"] in ("unknown_key", "removed_key"):
            messages.append(f"{key_path([*loc, ctx['key']], raw)}: {_clean(item['msg'])}")
            continue
        if item["type"] == "missing":
            messages.append(f"{key_path(loc, raw)}: is required but not set")
            continue
        got = item.get("input")
        own = OWN_MESSAGES.get((str(loc[-1]), item["type"])) if loc else None
        if own is not None and not (loc[-1] == "sharing" and isinstance(got, int | float)):
            messages.append(f"{key_path(loc, raw)}: {own(got)}")
            continue
        if loc and loc[-1] == "sharing" and isinstance(got, int | float) and not isinstance(got, bool):
            messages.append(f"{key_path(loc, raw)}: {_sharing_is_a_profile(got, raw)}")
            continue
        # A secret in the wrong place (a private key pasted as a public one) is never echoed back.
        hidden = item["type"] == SECRET_VALUE_ERROR
        shown = "" if hidden or isinstance(got, dict | list) or got is None else f" (got {got!r})"
        hint = hint_for(model, loc, item["type"], got) if model is not None else None
        what = EXPECTED.get(item["type"], _clean(item["msg"])) if hint else _clean(item["msg"])
        messages.append(f"{key_path(loc, raw)}: {what}{shown}" + (f"; {hint}" if hint else ""))
    # A URL quoted by any message (a proxy's, a mirror's) is quoted without its login (issue 50).
    return [without_userinfo(message) for message in messages]
