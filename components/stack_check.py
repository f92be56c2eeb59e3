"""The one validation of a stack, up to what it renders: every entry point that reads a stack calls it, so each
refuses the same stack files with the same messages, whatever else it imported first.

Its rules, every problem of a run at once: keys of this project under a misspelt prefix, integers written with a
leading zero, unknown keys, each key on its own, the rules across keys, the rules on the rendered plan
(rendered_plan.py: the final Helm values, cloud-init, the node's labels and taint), and a secret written in the
file in plain text. It lives here, not in config/,
because the rendered plan needs the components' builders and config may not import them (the layers point down).

Called by: the program (__main__.py, through config.loader.load_config: `pulumi preview`/`up`, `make preview` and
both files of `make diff`), `make diff`'s settled Nodes, and the day-2 command's `--stack` (doctor, claims,
repair, node-check) through `validate_stack_file`. A secret's presence and shape are checked where secrets are
read: by the program (config/loader.py), which reads them apart from these values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from components.rendered_plan import rendered_problems
from config.errors import ConfigError
from config.project import PREFIX
from config.stack import StackConfig
from config.stack_file import project_values, read_stack_file
from config.validate import file_problems, plain_text_secrets, validate_keys

__all__ = ["WATCHER_NOT_BUILT", "validate_program_stack", "validate_stack", "validate_stack_file"]


def validate_stack(raw: Mapping[str, Any], *, text: str | None = None, other_keys: Iterable[str] = ()) -> StackConfig:
    """Validate a stack's `gpu-pool:` values (`raw`, without their prefix) up to their rendered result. `text`: the
    stack file's text, where it is at hand; `other_keys`: the config's keys outside this project. Raises
    ConfigError with every problem."""
    written = file_problems(raw, text, other_keys)
    try:
        stack = validate_keys(raw, rendered=rendered_problems)
    except ConfigError as error:
        raise ConfigError(written + error.messages + plain_text_secrets(raw)) from None
    # After the keys, as the program reports secrets after them (and an earlier file's waivers come in that order).
    secrets = plain_text_secrets(raw)
    if written or secrets:
        raise ConfigError(written + secrets)
    return stack


def validate_stack_file(stack: str, root: Path) -> StackConfig:
    """Pulumi.<stack>.yaml in `root`, read as the Pulumi CLI reads it and validated as the program validates it;
    its secrets are not read. Raises config.stack_file.StackFileError or ConfigError."""
    config = read_stack_file(stack, root)
    text = (root / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8")
    return validate_stack(
        project_values(config), text=text, other_keys=[key for key in config if not key.startswith(PREFIX)]
    )


# The program's one refusal the day-2 commands do not share: the in-cluster watcher that would use the unattended
# repair's Proxmox token is not in this version, and a stack that created the token would hold a hypervisor
# credential in the cluster that nothing uses (issue 41). The day-2 commands still read such a stack (a person's
# `gpu-pool repair --reset-breaker` is no registration), so the rule is the program's, not validate_stack's.
WATCHER_NOT_BUILT = (
    "repair.unattended.enabled: the in-cluster repair watcher is not in this version of gpu-pool, so the stack "
    "would create a Proxmox token in the cluster that nothing uses; set repair.unattended.enabled: false (or leave "
    "it out). What this version has: the token's plan (components/unattended/credential.py), the guard rails and "
    "breaker as data (day2/repair/unattended.py) and `gpu-pool repair --reset-breaker`; a person runs "
    "`gpu-pool repair NODE --stack STACK` when the health check alerts (docs/day2.md)"
)


def _unattended_on(raw: Mapping[str, Any]) -> bool:
    # Read from the raw value too, so that the refusal comes with every other problem of a stack that fails
    # validation, coerced as pydantic coerces the key ("true", "yes", 1).
    repair = raw.get("repair")
    unattended = repair.get("unattended") if isinstance(repair, Mapping) else None
    if not isinstance(unattended, Mapping) or "enabled" not in unattended:
        return False
    try:
        return TypeAdapter(bool).validate_python(unattended["enabled"])
    except ValidationError:
        return False


def validate_program_stack(
    raw: Mapping[str, Any], *, text: str | None = None, other_keys: Iterable[str] = ()
) -> StackConfig:
    """validate_stack, and the program's refusal of `repair.unattended.enabled: true` (WATCHER_NOT_BUILT): the
    validation of `pulumi preview`/`up`, `make preview` and `make diff`. Raises ConfigError with every problem."""
    refused = [WATCHER_NOT_BUILT] if _unattended_on(raw) else []
    try:
        stack = validate_stack(raw, text=text, other_keys=other_keys)
    except ConfigError as error:
        raise ConfigError(error.messages + refused) from None
    if refused:
        raise ConfigError(refused)
    return stack
