"""`secure:` values the Pulumi CLI could not decrypt, found without the passphrase.

A stack file with `encryptionsalt:` and no `secretsprovider:` uses the passphrase secrets provider, whose
ciphertexts are `v1:<base64 nonce>:<base64 AES-GCM ciphertext>`. Anything else stops every `pulumi preview` with
"bad value" (or "unknown value version"), naming no key (pulumi sdk/v3 v3.276.0,
go/common/resource/config/crypt.go, `symmetricCrypter.DecryptValue`). The offline preview cannot decrypt, but it
can refuse what the CLI will refuse, and name the key. Other providers (cloud KMS, Pulumi Cloud) have their own
formats, which are left alone.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any


def _is_passphrase_ciphertext(value: object) -> bool:
    if not isinstance(value, str):
        return False
    parts = value.split(":")
    if len(parts) != 3 or parts[0] != "v1":
        return False
    try:
        for part in parts[1:]:
            base64.b64decode(part, validate=True)
    except binascii.Error:
        return False
    return True


def ciphertext_problems(document: Mapping[str, Any], file_name: str) -> list[str]:
    """One message per `secure:` value the passphrase provider of this stack file cannot decrypt."""
    if "encryptionsalt" not in document or document.get("secretsprovider"):
        return []
    config = document.get("config") or {}
    return [
        f"{file_name}: {key}: `secure:` is not a passphrase ciphertext (v1:<nonce>:<ciphertext>), so "
        f"`pulumi preview` stops with 'bad value': set it again with `pulumi config set --secret {key}`"
        for key, value in config.items()
        if isinstance(value, dict) and set(value) == {"secure"} and not _is_passphrase_ciphertext(value["secure"])
    ]
