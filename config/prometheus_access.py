"""How the day-2 tool and the reclaim policy log in to a Prometheus that asks for it (issue 50; docs/secrets.md):
basic auth or a bearer token, each by flag, environment or file, never inside a URL that is printed.

Prometheus' own clients keep the credential apart from the URL (`basic_auth`, `authorization` in its
http_config), as curl does (`--user`, `--oauth2-bearer`). A URL given with `user:password@` is split here: the
login becomes the request's Authorization header and every message names the URL without it
(config/plain_credentials.py).

Standard library only: the reclaim policy's payload runs it in the cluster.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from config.plain_credentials import login_problem, split_userinfo
from config.secrets import BEARER, PROMETHEUS_PASSWORD_ENV, PROMETHEUS_TOKEN_ENV

# The policy container's variable, from the Secret made of gpu-pool:prometheusAuth (secretKeyRef).
POLICY_AUTH_ENV = "GPU_POOL_PROMETHEUS_AUTH"
HOW = (
    "give basic auth as --prometheus-user NAME with the password in GPU_POOL_PROMETHEUS_PASSWORD (or "
    "--prometheus-password-file FILE), or a token in GPU_POOL_PROMETHEUS_TOKEN (or --prometheus-token-file FILE)"
)


class PrometheusAccessError(ValueError):
    """A credential given wrongly; the message never holds its value."""


@dataclass(frozen=True)
class PrometheusAccess:
    """Prometheus' base URL (without any login) and the Authorization header its requests carry ("" for none)."""

    url: str
    authorization: str = field(default="", repr=False)

    def headers(self) -> dict[str, str]:
        return {"Authorization": self.authorization} if self.authorization else {}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def authorization_of(secret: str) -> str:
    """gpu-pool:prometheusAuth's value (`user:password` or `Bearer <token>`) as an Authorization header."""
    if secret.startswith(BEARER):
        return secret
    user, _, password = secret.partition(":")
    return basic(user, password)


def _read(path: str, flag: str) -> str:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as error:
        raise PrometheusAccessError(f"{flag} {path}: cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PrometheusAccessError(f"{flag} {path}: is not UTF-8 text (value not shown)") from None
    # A file's last newline is the editor's, not the credential's.
    return text.removesuffix("\n").removesuffix("\r")


def _one(flag_value: str | None, file: str | None, file_flag: str, env: str, environ: Mapping[str, str]) -> str:
    """The credential from its flag, its file or its variable, in that order; "" for none."""
    if flag_value:
        return flag_value
    if file:
        return _read(file, file_flag)
    return environ.get(env, "")


def access_from(
    url: str,
    *,
    user: str | None = None,
    password: str | None = None,
    password_file: str | None = None,
    token: str | None = None,
    token_file: str | None = None,
    environ: Mapping[str, str],
) -> PrometheusAccess:
    """The access the flags, files and environment give; a login in the URL is split off into basic auth. Every
    mistake is one PrometheusAccessError naming the flags, never a value."""
    bare, login = split_userinfo(url)
    secret = _one(password, password_file, "--prometheus-password-file", PROMETHEUS_PASSWORD_ENV, environ)
    bearer = _one(token, token_file, "--prometheus-token-file", PROMETHEUS_TOKEN_ENV, environ)
    if login is not None:
        if user or password or password_file or token or token_file:
            raise PrometheusAccessError(
                f"--prometheus {bare} carries a login (user:password@, not shown) and other credential flags are "
                f"given too: give one of them; {HOW}"
            )
        if login_problem(login):
            raise PrometheusAccessError(f"--prometheus {bare}: its login (not shown) is not user:password; {HOW}")
        login_user, _, login_password = login.partition(":")
        return PrometheusAccess(bare, basic(login_user, login_password))
    if user and bearer and (token or token_file):
        raise PrometheusAccessError(f"--prometheus-user and a bearer token are both given: give one; {HOW}")
    if user:
        if not secret:
            raise PrometheusAccessError(f"--prometheus-user {user} has no password; {HOW}")
        return PrometheusAccess(bare, basic(user, secret))
    if password or password_file:
        raise PrometheusAccessError(f"a Prometheus password is given without --prometheus-user; {HOW}")
    return PrometheusAccess(bare, f"{BEARER}{bearer}" if bearer else "")


def policy_access(url: str, environ: Mapping[str, str]) -> PrometheusAccess:
    """The reclaim policy's: gpu-pool:prometheusAuth from its container's environment, when the stack sets it."""
    secret = environ.get(POLICY_AUTH_ENV, "")
    return PrometheusAccess(url, authorization_of(secret) if secret else "")
