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

from components.rendered_plan import rendered_problems
from config.errors import ConfigError
from config.project import PREFIX
from config.stack import StackConfig
from config.stack_file import project_values, read_stack_file
from config.validate import file_problems, plain_text_secrets, validate_keys

__all__ = ["validate_stack", "validate_stack_file"]


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
