"""A `secure:` value the CLI's passphrase provider cannot decrypt is refused offline, naming its key."""

from __future__ import annotations

import pytest

from config.ciphertexts import ciphertext_problems

SALT = "v1:8lHWmOdrjz8=:v1:mr23Y4tXjHfhujyQ:AanJ6B0BTOZGERQe6+Lg0dlngmA2mQ=="
# The shape `pulumi config set --secret` writes with a passphrase (nonce and AES-GCM ciphertext, base64).
WRITTEN = "v1:gN9QhP3v6XG4x7wB:9m0yVnA1v7o6Yx0J2eQ3dH0u8s4bW7kq1pA="


def stack(value: object, **top: object) -> dict[str, object]:
    return {"config": {"gpu-pool:rke2Token": {"secure": value}, "gpu-pool:x": "plain"}, **top}


@pytest.mark.parametrize("bad", ["v1:not-a-ciphertext", "v2:abc=:def=", "AAABAJ1k", "v1:!!:??", 42])
def test_a_secure_value_the_passphrase_provider_cannot_decrypt_is_refused_naming_its_key(bad: object) -> None:
    [problem] = ciphertext_problems(stack(bad, encryptionsalt=SALT), "Pulumi.prod.yaml")
    assert "gpu-pool:rke2Token" in problem
    assert "pulumi config set --secret gpu-pool:rke2Token" in problem


def test_a_ciphertext_as_the_cli_writes_it_passes() -> None:
    assert ciphertext_problems(stack(WRITTEN, encryptionsalt=SALT), "Pulumi.prod.yaml") == []


def test_other_secrets_providers_formats_are_left_to_the_cli() -> None:
    kms = stack("AQICAHh...", encryptionsalt=SALT, secretsprovider="awskms://alias/pulumi")
    assert ciphertext_problems(kms, "Pulumi.prod.yaml") == []
    assert ciphertext_problems(stack("AAABAJ1k"), "Pulumi.prod.yaml") == []
