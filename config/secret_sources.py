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

from config.secret_checks import wrapping_problem
from config.secrets import BY_KEY, SECRET_KEYS, SOURCE_ENV_PREFIX
from config.text_file import NotUtf8Error, read_utf8

PREFIX = SOURCE_ENV_PREFIX
FILE_ENV = "GPU_POOL_SECRETS_FILE"
KEYS = SECRET_KEYS


class SecretSourceError(Exception):
    pass


def env_name(key: str) -> str:
    """`rke2Token` -> `GPU_POOL_SECRET_RKE2TOKEN`."""
    return BY_KEY[key].source_env


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
        text = read_utf8(resolved)
    except OSError as error:
        raise SecretSourceError(f"{FILE_ENV}={path}: cannot read it: {error.strerror}") from None
    except NotUtf8Error as error:
        raise SecretSourceError(f"{FILE_ENV}={path}: {error}") from None
    found: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            problems.append(f"{FILE_ENV}={path}: line {number} is not KEY=VALUE (value not shown)")
            continue
        short = _short(key.strip())
        # The file is read as written, not by a shell: quotes around a value would become part of the secret.
        problem = wrapping_problem(value.strip(), key_file=BY_KEY[short].key_file)
        if problem:
            problems.append(
                f"{FILE_ENV}={path}: line {number} ({short}) {problem}; this file is KEY=VALUE lines read as "
                "written, not shell (value not shown)"
            )
        found[short] = value.strip().replace("\\n", "\n")
    if problems:
        raise SecretSourceError("\n".join(problems))
    return found


def secrets_from_environment(environ: Mapping[str, str], repo: Path) -> dict[str, str]:
    """Secret short name -> value, from the file first and the environment over it. Every problem of both
    sources comes back in one SecretSourceError, one line each, never with a value."""
    found: dict[str, str] = {}
    problems: list[str] = []
    if environ.get(FILE_ENV):
        try:
            found.update(_from_file(Path(environ[FILE_ENV]), repo))
        except SecretSourceError as error:
            problems.append(str(error))
    for key in KEYS:
        value = environ.get(env_name(key))
        if value:
            problem = wrapping_problem(value, key_file=BY_KEY[key].key_file)
            if problem:
                problems.append(f"{env_name(key)} (the environment variable) {problem} (value not shown)")
            found[key] = value
    if problems:
        raise SecretSourceError("\n".join(problems))
    return found


def current(repo: Path) -> dict[str, str]:
    return secrets_from_environment(os.environ, repo)
