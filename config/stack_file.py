"""Read a `Pulumi.<stack>.yaml` as the Pulumi CLI hands its config to the program: YAML as Go's yaml.v3 resolves it
(config/stack_yaml.py), keys namespaced as the CLI does, undecryptable ciphertexts refused naming their key
(config/ciphertexts.py). Every tool reads stack files through here: the offline preview, `make diff`, and the
day-2 command, which must not load the Pulumi SDKs to read one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from config.base import nearest
from config.ciphertexts import ciphertext_problems
from config.project import PREFIX, PROJECT, ROOT_DIR
from config.stack_yaml import DuplicateKeyError, load_stack_yaml
from config.text_file import NotUtf8Error, read_utf8

__all__ = ["PROJECT", "ROOT_DIR", "StackFileError", "namespaced", "project_values", "read_stack_file"]


class StackFileError(Exception):
    pass


def read_stack_file(stack: str, root: Path = ROOT_DIR) -> dict[str, Any]:
    """The `config:` map of Pulumi.<stack>.yaml, as the CLI would hand it to the program."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackFileError(f"no stack file {path.name} in {root}")
    try:
        document = load_stack_yaml(read_utf8(path), path.name) or {}
    except NotUtf8Error as error:
        raise StackFileError(f"{path.name}: {error}") from None
    except DuplicateKeyError as error:
        raise StackFileError(str(error)) from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{path.name} is not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise StackFileError(f"{path.name}: the file must be a map with a `config:` key")
    misplaced = _top_level_problems(document, path.name)
    if misplaced:
        raise StackFileError("\n".join(misplaced))
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name}: `config` must be a map of keys")
    problems = ciphertext_problems(document, path.name)
    if problems:
        raise StackFileError("\n".join(problems))
    return namespaced(config, path.name)


# The keys of a stack file (pulumi sdk/v3 go/common/workspace/project.go, `ProjectStack`'s yaml tags). The CLI
# hands the program only `config:`; a key anywhere else is read by nobody.
STACK_FILE_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")


def _top_level_problems(document: Mapping[Any, Any], file_name: str) -> list[str]:
    problems: list[str] = []
    for key in document:
        name = str(key)
        if name in STACK_FILE_KEYS:
            continue
        if ":" in name or name.startswith(PROJECT):
            problems.append(
                f"{file_name}: `{name}` is outside `config:`, where the Pulumi CLI never gives it to the program: "
                "indent it under config: (two spaces)"
            )
            continue
        suggestion = nearest(name, list(STACK_FILE_KEYS))
        hint = f"did you mean `{suggestion}:`?" if suggestion else f"a stack file has: {', '.join(STACK_FILE_KEYS)}"
        problems.append(f"{file_name}: `{name}` is not a key of a stack file, so nothing reads it; {hint}")
    return problems


def namespaced(config: Mapping[Any, Any], file_name: str) -> dict[str, Any]:
    """Keys as the CLI hands them to the program: a key without a namespace is this project's (`rke2` is
    `gpu-pool:rke2`; pulumi sdk/v3 v3.276.0 go/common/workspace/loaders.go, `stackConfigNamespacedWithProject`)."""
    keys: dict[str, Any] = {}
    for key, value in config.items():
        full = str(key) if ":" in str(key) else f"{PROJECT}:{key}"
        if full in keys:
            # The CLI keeps one of the two, whichever its map iteration meets last: refuse the guess.
            raise StackFileError(f"{file_name}: {full} is given twice, once without its `{PROJECT}:` prefix: keep one")
        keys[full] = value
    return keys


def project_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """This project's non-secret keys of a stack file's config, without their prefix, as config.validate takes them:
    what a tool that never decrypts validates (a `secure:` value is left out, its key with it)."""
    return {
        key.removeprefix(PREFIX): value
        for key, value in config.items()
        if key.startswith(PREFIX) and not (isinstance(value, dict) and set(value) == {"secure"})
    }
