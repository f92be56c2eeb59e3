"""Run `__main__.py` under the Pulumi mock monitor with a stack's config: no engine, no lab, no secrets."""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks, settings
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from config.secrets import BY_KEY, SECRETS, generic_placeholder
from config.stack_file import PROJECT, ROOT_DIR, StackFileError, namespaced, read_stack_file
from offline.recording import PlanMocks, Recording, RecordingMonitor

# Read here, used by every tool that runs the program.
__all__ = ["PROJECT", "ROOT_DIR", "StackFileError", "namespaced", "read_stack_file"]

PROGRAM = ROOT_DIR / "__main__.py"
OFFLINE_ENV = "GPU_POOL_OFFLINE"
# Where the program finds the stack file's text (config.loader reads how its numbers were written).
STACK_FILE_ENV = "GPU_POOL_STACK_FILE"
# The secrets a stack may need; each gets a placeholder unless given. Optional ones (sshPrivateKey) only when the
# stack file sets them, as `pulumi preview` would only see them then.
SECRET_KEYS = tuple(secret.key for secret in SECRETS if secret.required)


def needed_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The secrets this stack file needs: the required ones, and the proxy's login where `proxy.login` says so."""
    proxy = config.get(f"{PROJECT}:proxy")
    login = isinstance(proxy, Mapping) and proxy.get("login") is True
    return (*SECRET_KEYS, *(("proxyAuth",) if login else ()))


def placeholder(key: str, ciphertext: str | None = None) -> str:
    """Stands in for a secret, shaped like the real one so the program's checks pass. A `secure:` value's
    placeholder carries a digest of its ciphertext, so a rotated secret reads as changed in `make diff` while
    its value stays unknown."""
    digest = hashlib.sha256((ciphertext or key).encode()).hexdigest()
    secret = BY_KEY.get(key)
    return secret.placeholder(digest) if secret is not None else generic_placeholder(key, digest)


def to_engine_config(config: Mapping[str, Any], secrets: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Values as the engine passes them (strings, objects as JSON) plus the secret keys.

    `secure:` values cannot be decrypted without the CLI; every secret the program reads gets the
    value given with --secret or a placeholder, and is marked secret like the engine marks it. A secret
    written in plain text in the stack file is passed as it is, not secret, as the engine would (the
    program refuses it).
    """
    engine: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
            engine[key] = placeholder(key.partition(":")[2], str(value["secure"]))
        elif isinstance(value, str):
            engine[key] = value
        else:
            engine[key] = json.dumps(value)
    for short in needed_keys(config):
        key = f"{PROJECT}:{short}"
        if key not in engine:
            engine[key] = placeholder(short)
            secret_keys.append(key)
    for short, value in secrets.items():
        key = short if ":" in short else f"{PROJECT}:{short}"
        engine[key] = value
        secret_keys.append(key)
    return engine, sorted(set(secret_keys))


def secret_markers(config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, str]:
    """Each secret value the preview runs with -> the marker a reviewable file shows instead of it."""
    engine, secret_keys = to_engine_config(config, secrets)
    markers = {engine[key]: f"<secret {key}>" for key in secret_keys if engine.get(key)}
    # The parts of a secret the program writes on their own (a registry password inside registries.yaml, a client
    # key as a file): their marker too.
    for key in secret_keys:
        secret = BY_KEY.get(key.partition(":")[2]) if key.startswith(f"{PROJECT}:") else None
        if secret is not None and engine.get(key):
            for part in secret.written_parts(engine[key]):
                markers.setdefault(part, f"<secret {key}>")
    return markers


def placeholder_keys(config: Mapping[str, Any], secrets: Mapping[str, str]) -> list[str]:
    """The secrets an offline preview made up: not given with --secret."""
    given = {short if ":" in short else f"{PROJECT}:{short}" for short in secrets}
    secure = {key for key, value in config.items() if isinstance(value, dict) and set(value) == {"secure"}}
    required = {f"{PROJECT}:{short}" for short in needed_keys(config) if f"{PROJECT}:{short}" not in config}
    return sorted((secure | required) - given)


def _no_stack_trace() -> source_pb2.StackTrace:
    return source_pb2.StackTrace()


def install_mocks(
    stack: str,
    *,
    preview: bool = True,
    invoke: Callable[[mocks.MockCallArgs], dict[str, Any]] | None = None,
) -> RecordingMonitor:
    """`pulumi.runtime.set_mocks` with a recording monitor: the one way tests and the preview set up."""
    # For every resource the SDK walks the Python stack and formats each frame (traceback.extract_stack reads the
    # source lines) so that the engine can record where the resource was declared; the mock monitor drops it, and
    # the walk was a tenth of an offline preview. The SDK's own answer when it finds no frame is sent instead.
    # Only under the mocks: a program under the engine runs in a process of its own, untouched.
    if hasattr(sdk_resource, "_get_stack_trace"):
        sdk_resource._get_stack_trace = _no_stack_trace
    monitor = RecordingMonitor(PlanMocks(preview, invoke))
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    return monitor


def set_config(config: Mapping[str, str], secret_keys: list[str]) -> None:
    pulumi.runtime.config.set_all_config(dict(config), secret_keys)


def execute(program: Callable[[], object]) -> None:
    """Run a program inside a fresh stack resource and wait for every registration, as the engine would."""
    # set_mocks installs a stack resource of its own; the program gets a fresh one so exports are recorded.
    settings.ROOT.set(None)
    if str(ROOT_DIR) not in sys.path:
        sys.path.insert(0, str(ROOT_DIR))

    def run() -> None:
        program()

    _sync_await(run_in_stack(run))


def run_main(program: Path = PROGRAM) -> None:
    execute(lambda: runpy.run_path(str(program)))


def run_stack(
    stack: str,
    *,
    config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
    invoke: Callable[[mocks.MockCallArgs], dict[str, Any]] | None = None,
    program: Path = PROGRAM,
    stack_file: Path | None = None,
) -> Recording:
    """Preview a stack offline: its stack file (or `config`, read from `stack_file`), given secrets or placeholders.

    The program is told it runs offline (GPU_POOL_OFFLINE=1): no Proxmox API, cluster or ssh-agent to ask, so
    it reports its preflights as skipped rather than passed.
    """
    raw = read_stack_file(stack) if config is None else dict(config)
    if config is None:
        stack_file = ROOT_DIR / f"Pulumi.{stack}.yaml"
    engine, secret_keys = to_engine_config(raw, secrets or {})
    monitor = install_mocks(stack, preview=True, invoke=invoke)
    set_config(engine, secret_keys)
    settings = {OFFLINE_ENV: "1", STACK_FILE_ENV: str(stack_file) if stack_file is not None else None}
    previous = {name: os.environ.get(name) for name in settings}
    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        run_main(program)
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return monitor.recording
