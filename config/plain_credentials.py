"""Credentials written inside URLs (`http://user:password@proxy:3128`, `http://admin:pw@prometheus:9090`): found,
split off and never quoted back (issue 50; docs/secrets.md).

curl (`--proxy-user`, `--user`), Prometheus' own clients (`basic_auth`, `authorization`) and RKE2 keep the login
apart from the URL for the same reason: a URL is what every message, plan and log quotes. The stack takes a proxy's
login as the secret `gpu-pool:proxyAuth`, Prometheus' by flag, environment or file (config/prometheus_access.py), and
every message that quotes a URL goes through `without_userinfo` first.

Standard library only: node-check, on the node, and the in-cluster payloads import it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

# Everything from a scheme's `//` to the last `@` before the next space or quote: the userinfo of a URL even where a
# `#`, `?` or `/` in the password makes urlsplit see no userinfo at all (`http://u:pa#ss@proxy:3128` parses as host
# `u`, port `pa`, fragment `ss@proxy:3128`, and a message quoting its "bad port" would print the password).
# A quote is taken as part of it too (a password may hold one); a space ends it, as it ends a URL.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^\s<>]*@")
HIDDEN = "***"


def without_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` replaced by `***@`: for any message that may quote a URL."""
    return _USERINFO.sub(lambda match: f"{match['scheme']}{HIDDEN}@", text)


def has_userinfo(url: str) -> bool:
    """Whether a URL carries `user[:password]@`, even one urlsplit misreads (a `#` or `/` in the password)."""
    return bool(_USERINFO.search(url))


def split_userinfo(url: str) -> tuple[str, str | None]:
    """`http://u:p%40ss@host:3128` -> (`http://host:3128`, `u:p@ss`): the URL without its login, and the login as
    `user:password` with its percent-escapes decoded (None where it has none). The login is everything before the
    last `@` of the authority, so a raw `#`, `@` or `/` in the password stays in the password."""
    match = _USERINFO.match(url)
    if match is None:
        return url, None
    userinfo = url[len(match["scheme"]) : match.end() - 1]
    rest = url[match.end() :]
    user, colon, password = userinfo.partition(":")
    return match["scheme"] + rest, unquote(user) + (colon + unquote(password) if colon else "")


def with_userinfo(url: str, login: str) -> str:
    """`http://host:3128` with the login `user:password` -> `http://user:password@host:3128`, each part
    percent-encoded (a `@`, `:` or `#` in the password would otherwise end it): how curl, Go and apt read a proxy's
    login from its URL, in the root-only places the login may be in clear."""
    parts = urlsplit(url)
    user, colon, password = login.partition(":")
    userinfo = quote(user, safe="") + (":" + quote(password, safe="") if colon else "")
    return urlunsplit((parts.scheme, f"{userinfo}@{parts.netloc}", parts.path, parts.query, parts.fragment))


def login_problem(value: str) -> str | None:
    """What is wrong with a `user:password` login (never quoting it), or None."""
    user, colon, password = value.partition(":")
    if not colon or not user or not password:
        return "is not user:password (a user, a colon, the password)"
    if any(char in value for char in "\r\n"):
        return "contains a line break (copied with the file's newline?): set it without"
    return None
