"""Where the day-2 command reaches a cluster through a kubeconfig: the official `kubernetes` client, which reads every
kubeconfig form (exec plugins, client certificates, tokens), as a transport of node/'s one client (node/kube.py
`Kube`). So `claims`, `doctor`, `repair` and `repair --reset-breaker` make their requests through the same
interface, with the same manners, as the wave and the watcher; node/ itself stays standard library only.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any

from day2.errors import Day2Error
from node.kube import Answer, Kube, Unreachable

REQUEST_TIMEOUT_SECONDS = 15
# A person waits at the terminal: an API server that does not answer is said after two more tries, not ten.
CLI_RETRIES = 2


class Official:
    """node/kube.py's Transport over the official client's ApiClient (its configuration from the kubeconfig)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def request(self, method: str, path: str, body: bytes | None, content_type: str) -> Answer:
        from kubernetes.client.exceptions import ApiException

        base, _, query = path.partition("?")
        try:
            response = self.api.call_api(
                base,
                method,
                query_params=urllib.parse.parse_qsl(query),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=json.loads(body) if body else None,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as error:
            after = (error.headers or {}).get("Retry-After") if error.headers else None
            body_bytes = error.body if isinstance(error.body, bytes) else str(error.body or "").encode()
            return Answer(int(error.status or 0), body_bytes, float(after) if after else None, str(error.reason or ""))
        except Exception as error:  # urllib3's connection errors, ssl, socket: no answer
            reason = root_cause(error)
            raise Unreachable(reason, sent="refused" not in reason.lower()) from None
        return Answer(int(response.status), bytes(response.data))


def connect(kubeconfig: str | None, context: str | None) -> tuple[Kube, str]:
    """The one client over the kubeconfig's cluster, and how to name that cluster in a message. kubeconfig/context
    None: kubectl's defaults (KUBECONFIG, ~/.kube/config, its current context)."""
    from kubernetes import client, config

    where = f"context {context}" if context else "the current context"
    source = kubeconfig or "the default kubeconfig (KUBECONFIG or ~/.kube/config)"
    # urllib3 logs every retry as a warning; the one line the caller writes says what failed instead.
    logging.getLogger("urllib3").setLevel(logging.CRITICAL)
    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
    except Exception as error:  # ConfigException, OSError, or a file that is not a kubeconfig at all
        hint = "" if kubeconfig else "; read a dump instead with --from FILE"
        raise Day2Error(f"cannot load {where} from {source}: {one_line(error)}{hint}") from None
    configuration = client.Configuration.get_default_copy()
    configuration.retries = 0
    return Kube(Official(client.ApiClient(configuration)), max_retries=CLI_RETRIES), f"{configuration.host} ({where})"


def root_cause(error: BaseException) -> str:
    """The innermost reason of a chained error (urllib3 wraps the socket's in two layers), as one line."""
    current = error
    for _ in range(10):
        inner = getattr(current, "reason", None)
        inner = inner if isinstance(inner, BaseException) else current.__cause__ or current.__context__
        if inner is None or inner is current:
            break
        current = inner
    if isinstance(current, OSError) and current.strerror:
        return current.strerror
    return one_line(current)


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
