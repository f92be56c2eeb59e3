"""Where the offline preview, `make diff` and `gpu-pool repair` take real secrets from, without a command line
that echoes them.

`ARGS="--secret KEY=VALUE"` lands in the terminal, the shell history and CI logs (make prints the command it
runs), and a `!` in a Proxmox token breaks it in bash. The environment (`GPU_POOL_SECRET_RKE2TOKEN=...`) or a
file outside the repository (`GPU_POOL_SECRETS_FILE=~/.config/gpu-pool/lab.env`, `KEY=VALUE` lines) are never
echoed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from config.validate import SECRET_KEYS

PREFIX = "GPU_POOL_SECRET_"
FILE_ENV = "GPU_POOL_SECRETS_FILE"
KEYS = SECRET_KEYS


class SecretSourceError(Exception):
    pass


def env_name(key: str) -> str:
    """`rke2Token` -> `GPU_POOL_SECRET_RKE2TOKEN`."""
    return PREFIX + key.upper()


def _short(key: str) -> str:
    short = key.partition(":")[2] if ":" in key else key
    match = next((k for k in KEYS if k.lower() == short.lower()), None)
    if match is None:
        raise SecretSourceError(f"{FILE_ENV}: {key!r} is not a secret key; the keys are {', '.join(KEYS)}")
    return match


def _from_file(path: Path, repo: Path) -> dict[str, str]:
    resolved = path.expanduser().resolve()
    if resolved.is_relative_to(repo.resolve()):
        raise SecretSourceError(
            f"{FILE_ENV}={path} is inside the repository, where a commit can take it: keep it outside, "
            "e.g. ~/.config/gpu-pool/<stack>.env"
        )
    try:
        text = resolved.read_text(encoding="utf-8")
    except OSError as error:
        raise SecretSourceError(f"{FILE_ENV}={path}: cannot read it: {error.strerror}") from None
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SecretSourceError(f"{FILE_ENV}={path}: line {number} is not KEY=VALUE (value not shown)")
        found[_short(key.strip())] = value.strip().replace("\\n", "\n")
    return found


def secrets_from_environment(environ: Mapping[str, str], repo: Path) -> dict[str, str]:
    """Secret short name -> value, from the file first and the environment over it."""
    found: dict[str, str] = {}
    if environ.get(FILE_ENV):
        found.update(_from_file(Path(environ[FILE_ENV]), repo))
    for key in KEYS:
        value = environ.get(env_name(key))
        if value:
            found[key] = value
    return found


def current(repo: Path) -> dict[str, str]:
    return secrets_from_environment(os.environ, repo)
