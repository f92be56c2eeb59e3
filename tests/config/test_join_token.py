"""The RKE2 join token is judged by RKE2's own grammar (k3s pkg/clientaccess/token.go, parseToken, which RKE2's agent
runs): what it refuses is refused at preview, what it takes is taken, and a file path where the token's text
belongs is refused; never with the value in the message."""

from __future__ import annotations

import pytest

from config.secret_checks import secret_problems

HASH = "0123456789abcdef" * 4
SECRET = {"gpu-pool:rke2Token"}


def _said(token: str) -> str:
    return "\n".join(secret_problems({"rke2Token": token}, SECRET))


@pytest.mark.parametrize(
    "token",
    [
        f"K10{HASH}::server:a-password",  # a server's node-token file
        f"K10{HASH}::node:a-password",  # the agent token
        f"K10{HASH}::abcdef.0123456789abcdef",  # a bootstrap token with the CA hash (`rke2 token create`)
        "K10::server:a-password",  # no hash: RKE2 takes it (and warns that the CA is not pinned)
        f"K10{HASH}:::a-password",  # an empty user: parseToken takes it; the agent sends its own
        "a-short-token",  # the password alone
        "abcdef.0123456789abcdef",  # a bootstrap token alone
    ],
)
def test_a_token_rke2_parses_is_taken(token: str) -> None:
    assert _said(token) == ""


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("K10deadbeef::server:abc", "a CA hash of 8 characters after K10, where RKE2 takes 64"),
        (f"K10{HASH}0::server:abc", "a CA hash of 65 characters"),
        (f"K10{HASH.upper()}::server:abc", "not 64 lower-case hex digits"),
        (f"K10{HASH[:-1]}g::server:abc", "not 64 lower-case hex digits"),
        (f"K10{HASH}::server:", "has no <user>:<password>"),
        (f"K10{HASH}::just-a-password", "has no <user>:<password>"),
        (f"K10{HASH}::", "has no <user>:<password>"),
        ("K10server", "has no <user>:<password>"),
    ],
)
def test_a_full_token_whose_structure_rke2_refuses_is_refused_by_its_part(token: str, said: str) -> None:
    message = _said(token)

    assert "gpu-pool:rke2Token: the RKE2 join token starts like a full RKE2 token" in message
    assert said in message and "(value not shown)" in message
    assert "abc" not in message.replace("(", " ")


@pytest.mark.parametrize(
    "token",
    [
        "/var/lib/rancher/rke2/server/node-token",
        "~/node-token",
        "./node-token",
        "../secrets/node-token",
        "file:///var/lib/rancher/rke2/server/token",
        "FILE:///etc/token",
    ],
)
def test_a_join_token_given_as_a_file_path_is_refused_with_where_the_token_is(token: str) -> None:
    message = _said(token)

    assert "the RKE2 join token is a file path, not the token: give the file's content" in message
    assert "sudo cat /var/lib/rancher/rke2/server/node-token" in message
