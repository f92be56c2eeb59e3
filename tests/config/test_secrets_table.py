"""config/secrets.py holds each secret once; every reader of a secret goes through its row, so a new secret is one
row. These check the rows against what each reader does with them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from config.schema_export import config_reference, stack_file_schema
from config.secret_checks import secret_problems
from config.secret_sources import secrets_from_environment
from config.secrets import AUTH_MODES, BY_KEY, SECRETS, Auth, auth_mode, needed_secrets, proxmox_credential
from offline.runner import placeholder, placeholder_keys

FULL = {f"gpu-pool:{secret.key}" for secret in SECRETS}


# A stack file's `secure:` ciphertexts, or none (the key alone is digested): the placeholder's digest varies with it.
CIPHERTEXTS = (None, "v1:abc", "AAABAA==", "v1:" + "x" * 200, "é ü \n", "-----BEGIN")


@pytest.mark.parametrize("key", BY_KEY)
@pytest.mark.parametrize("ciphertext", CIPHERTEXTS)
def test_every_offline_placeholder_passes_its_own_secrets_shape_check(key: str, ciphertext: str | None) -> None:
    value = placeholder(key, ciphertext)

    assert secret_problems({key: value}, FULL) == []


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_each_auth_mode_needs_exactly_its_own_proxmox_credential_and_the_join_token(auth: Auth) -> None:
    credential = proxmox_credential(auth)
    needed = [secret.key for secret in needed_secrets(auth)]

    assert credential.auth == auth and credential.provider_env is not None
    assert credential.key in needed and "rke2Token" in needed and "sshPrivateKey" not in needed
    assert [s.key for s in needed_secrets(auth) if s.auth is not None] == [credential.key]


RAW_AUTH = [({"auth": "rootPassword"}, "rootPassword"), ({}, "apiToken"), ({"auth": "nonsense"}, "apiToken"),
            ("not a map", "apiToken")]  # fmt: skip


@pytest.mark.parametrize(("proxmox", "expected"), RAW_AUTH)
def test_the_auth_mode_of_a_raw_proxmox_value_falls_back_to_the_default(proxmox: object, expected: str) -> None:
    assert auth_mode(proxmox) == expected


def test_the_schema_and_the_config_reference_describe_every_secret_from_its_row() -> None:
    properties = stack_file_schema()["properties"]["config"]["properties"]
    reference = config_reference()

    for secret in SECRETS:
        assert properties[f"gpu-pool:{secret.key}"]["description"].startswith(secret.description)
        assert f"| `gpu-pool:{secret.key}` | {secret.description} | {secret.needed} |" in reference


def test_every_secret_is_read_from_its_environment_variable(tmp_path: Path) -> None:
    environ = {secret.source_env: placeholder(secret.key) for secret in SECRETS}

    assert secrets_from_environment(environ, repo=tmp_path) == {
        secret.key: placeholder(secret.key) for secret in SECRETS
    }


def test_the_offline_preview_makes_up_every_required_secret_and_no_optional_one() -> None:
    made_up = placeholder_keys({}, {})

    assert made_up == sorted(f"gpu-pool:{secret.key}" for secret in SECRETS if secret.required)


def test_a_rotated_ciphertext_changes_the_placeholder_but_never_shows_the_ciphertext() -> None:
    for secret in SECRETS:
        first, second = placeholder(secret.key, "v1:aaaa"), placeholder(secret.key, "v1:bbbb")
        assert first != second and "aaaa" not in first
        assert hashlib.sha256(b"v1:aaaa").hexdigest()[:8] in first
