"""Which GPU holders left their card idle, from dcgm-exporter's per-pod utilisation series in Prometheus.

dcgm-exporter names the pod holding a GPU on each series (`pod`, `namespace`). Behind the operator's
ServiceMonitor (honorLabels false) Prometheus keeps the scrape target's own `pod`/`namespace` and renames the
exporter's to `exported_pod`/`exported_namespace`; both shapes are read, the exported ones first.

Caveat: on a time-sliced card the exporter names only one of the pods sharing it (KUBERNETES_VIRTUAL_GPUS
false, the default), so a pod sharing a card may have no series of its own (no idle flag), and the series
it has measures the whole card, whichever pod kept it busy.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from config.plain_credentials import without_userinfo
from config.prometheus_access import HOW
from day2.errors import Day2Error
from knowledge.gpu_operator import (
    DCGM_EXPORTED_NAMESPACE_LABEL,
    DCGM_EXPORTED_POD_LABEL,
    DCGM_NAMESPACE_LABEL,
    DCGM_POD_LABEL,
)
from knowledge.metric_names import DCGM_GPU_UTIL, dcgm_series

T = TypeVar("T")

TIMEOUT_SECONDS = 15
POD_LABELS = (DCGM_EXPORTED_NAMESPACE_LABEL, DCGM_EXPORTED_POD_LABEL, DCGM_NAMESPACE_LABEL, DCGM_POD_LABEL)


def peak_utilisation_query(hours: int) -> str:
    """Highest GPU utilisation over the window, per pod as the exporter names it (either label shape)."""
    return f"max by ({', '.join(POD_LABELS)}) ({dcgm_series(DCGM_GPU_UTIL, over_time=('max_over_time', f'{hours}h'))})"


def holder_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(namespace, pod) a series is about: the exporter's renamed labels first, else its own."""
    pod = labels.get(DCGM_EXPORTED_POD_LABEL) or labels.get(DCGM_POD_LABEL)
    if not pod:
        return None
    namespace = labels.get(DCGM_EXPORTED_NAMESPACE_LABEL) if labels.get(DCGM_EXPORTED_POD_LABEL) else None
    return (namespace or labels.get(DCGM_NAMESPACE_LABEL) or "", pod)


def peaks_from_response(body: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> peak utilisation (percent), from a /api/v1/query vector response."""
    if body.get("status") != "success" or body.get("data", {}).get("resultType") != "vector":
        raise ValueError(f"unexpected answer: {str(body)[:200]}")
    peaks: dict[tuple[str, str], float] = {}
    for sample in body["data"]["result"]:
        key = holder_of({str(k): str(v) for k, v in sample.get("metric", {}).items()})
        if key is None:
            continue
        value = float(sample["value"][1])
        peaks[key] = max(value, peaks.get(key, value))
    return peaks


def instant_query(
    url: str,
    promql: str,
    at: datetime,
    read: Callable[[Any], T],
    *,
    timeout: float = TIMEOUT_SECONDS,
    named: str = "--prometheus",
    headers: Mapping[str, str] | None = None,
) -> T:
    """Ask Prometheus at `url` (its base URL) one instant query at `at`; `read` turns its answer into what the caller
    needs, and every way that fails (refused, unreachable, not an answer) is one Day2Error naming `named` (the option
    or the config key the URL came from)."""
    # Whatever the caller passed, a login in the URL is never sent in it nor quoted by a message below.
    url = without_userinfo(url)
    query = urllib.parse.urlencode({"query": promql, "time": f"{at.timestamp():.3f}"})
    endpoint = f"{url.rstrip('/')}/api/v1/query?{query}"
    if urllib.parse.urlparse(endpoint).scheme not in ("http", "https"):
        raise Day2Error(f"{named} {url}: not an http(s) URL")
    request = urllib.request.Request(endpoint, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read().decode("utf-8"))
        return read(body)
    except urllib.error.HTTPError as error:
        login = (
            f": it asks for a login; {HOW}"
            if error.code in (401, 403) and not headers
            else ": the login given was not accepted (not shown)"
            if error.code in (401, 403)
            else ""
        )
        raise Day2Error(f"{named} {url}: the query was refused: HTTP {error.code} {error.reason}{login}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise Day2Error(f"{named} {url}: cannot reach it: {reason}") from None
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise Day2Error(f"{named} {url}: not a Prometheus query answer: {error}") from None


def peak_utilisation(
    url: str, hours: int, at: datetime, headers: Mapping[str, str] | None = None
) -> dict[tuple[str, str], float]:
    """Ask Prometheus at `url` (its base URL) for each pod's peak GPU utilisation over `hours` before `at`."""
    return instant_query(url, peak_utilisation_query(hours), at, peaks_from_response, headers=headers)


def idle_holders(
    peaks: Mapping[tuple[str, str], float], held_seconds: Mapping[tuple[str, str], int], hours: int, percent: float
) -> frozenset[tuple[str, str]]:
    """Holders whose GPU never passed `percent` over the whole window they held it.

    Only pods that have held the GPU for at least the window, like the GpuHeldWhileIdle alert: a pod bound
    ten minutes ago has not had the chance to use its card yet. A holder with no series is not flagged.
    """
    window = hours * 3600
    return frozenset(
        key for key, held in held_seconds.items() if held >= window and key in peaks and peaks[key] <= percent
    )
