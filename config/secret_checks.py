"""The secrets' shapes, checked without ever showing a value, and secrets written in plain text refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from config.project import PROJECT
from config.secrets import SECRETS

SHAPES: Mapping[str, tuple[str, Callable[[str], str | None]]] = {
    secret.key: (secret.description, secret.shape) for secret in SECRETS
}


QUOTES = ('"', "'")


def wrapping_problem(value: str, *, key_file: bool = False) -> str | None:
    """Quotes around a secret, or whitespace at its ends, that a shell would have taken away but a config value or
    a KEY=VALUE file keeps: they become part of the token (the servers refuse the join, the API the token). A
    private key's file ends with a newline; only quotes count there."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in QUOTES:
        kind = "double" if value[0] == QUOTES[0] else "single"
        return f"is wrapped in {kind} quotes, which would be part of the secret: set it without them"
    if not key_file and value != value.strip():
        return (
            "starts or ends with whitespace (a space, a tab or a line break), which would be part of the secret: "
            "set it without"
        )
    return None


def secret_problems(values: Mapping[str, str], secret_keys: set[str]) -> list[str]:
    """`values`: the secret config keys that are set (short name -> value); `secret_keys`: which are secret."""
    problems: list[str] = []
    for secret in SECRETS:
        key, what = secret.key, secret.description
        if key not in values:
            continue
        full = f"{PROJECT}:{key}"
        if full not in secret_keys:
            problems.append(
                f"{full}: {what} is in the stack file in plain text, where anyone who can read the file or its git "
                f"history has it: remove it from the file and run: pulumi config set --secret {full} <value>"
            )
            continue
        problem = wrapping_problem(values[key], key_file=secret.key_file) or secret.shape(values[key])
        if problem:
            problems.append(f"{full}: {what} {problem} (value not shown)")
    return problems
