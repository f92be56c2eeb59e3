"""What DCGM saw of each card over the window, read from the per-card recording rules in Prometheus
(components/gpu_platform/card_rules.py): the peak utilisation, how many of the window's minutes were recorded, and the
pod the exporter names on the card now.

One reader for both callers, `gpu-pool claims --reclaimable` and the policy in the cluster: the same queries, the
same answer, so both judge on the same evidence. Standard library only (the policy's payload runs without site
packages).

Credentials: the URL carries none (config/reclaim.py refuses them, config/prometheus_access.py splits a CLI URL's
off). `PrometheusSource.authorization` is the Authorization header every query carries: from the claims flags,
or from the policy container's environment (gpu-pool:prometheusAuth through a Secret); never printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from components.gpu_platform.card_rules import CARD_HOLDER, CARD_INTERVAL_SECONDS, CARD_UTILISATION
from day2.claims.prometheus import instant_query

TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class CardSeries:
    """One card as Prometheus recorded it: `node` (the Kubernetes node), `gpu` (the index on it) and `uuid`;
    `peak` its highest utilisation (percent) over the window; `samples` the recorded minutes in it; `holders` the
    (namespace, pod) dcgm-exporter names on it now (one at most on a time-sliced card)."""

    node: str
    gpu: str
    uuid: str
    peak: float
    samples: int
    holders: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Evidence:
    """Every card Prometheus knows, over a window of `minutes` (the recording rule's samples a whole window holds)."""

    minutes: int
    cards: tuple[CardSeries, ...]

    def on(self, node: str) -> tuple[CardSeries, ...]:
        return tuple(card for card in self.cards if card.node == node)


@dataclass(frozen=True)
class PrometheusSource:
    """Where the evidence comes from, and what names it in a message (`--prometheus`, or the config key)."""

    url: str
    named: str = "--prometheus"
    authorization: str = field(default="", repr=False)

    def headers(self) -> dict[str, str]:
        """The request's own headers: the Authorization its login gives, if any."""
        return {"Authorization": self.authorization} if self.authorization else {}


def window_minutes(hours: int) -> int:
    return hours * 3600 // CARD_INTERVAL_SECONDS


def peak_query(hours: int) -> str:
    return f"max_over_time({CARD_UTILISATION}[{hours}h])"


def samples_query(hours: int) -> str:
    return f"count_over_time({CARD_UTILISATION}[{hours}h])"


def _card_key(labels: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(labels.get("node", "")), str(labels.get("gpu", "")), str(labels.get("UUID", "")))


def _vector(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    if body.get("status") != "success" or body.get("data", {}).get("resultType") != "vector":
        raise ValueError(f"unexpected answer: {str(body)[:200]}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def cards_from_answers(
    peaks: list[dict[str, Any]], samples: list[dict[str, Any]], holders: list[dict[str, Any]], minutes: int
) -> Evidence:
    """The Evidence from the three answers (each a vector result): a card is one with a peak; a card without a node
    label (an exporter that named none) cannot be matched to a Node and is left out."""
    counted = {_card_key(s["metric"]): int(float(s["value"][1])) for s in samples}
    named: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
    for sample in holders:
        labels = sample["metric"]
        if labels.get("pod"):
            named.setdefault(_card_key(labels), set()).add((str(labels.get("namespace", "")), str(labels["pod"])))
    cards = tuple(
        CardSeries(
            node=key[0],
            gpu=key[1],
            uuid=key[2],
            peak=float(sample["value"][1]),
            samples=counted.get(key, 0),
            holders=tuple(sorted(named.get(key, ()))),
        )
        for sample in peaks
        if (key := _card_key(sample["metric"]))[0]
    )
    return Evidence(minutes, tuple(sorted(cards, key=lambda c: (c.node, c.gpu, c.uuid))))


def read_evidence(source: PrometheusSource, hours: int, at: datetime) -> Evidence:
    """Ask Prometheus for every card's peak and recorded minutes over `hours` before `at`, and its holder at `at`.
    Every way that fails is a Day2Error naming `source.named`."""

    def ask(promql: str) -> list[dict[str, Any]]:
        return instant_query(
            source.url, promql, at, _vector, timeout=TIMEOUT_SECONDS, named=source.named, headers=source.headers()
        )

    return cards_from_answers(
        ask(peak_query(hours)), ask(samples_query(hours)), ask(CARD_HOLDER), window_minutes(hours)
    )
