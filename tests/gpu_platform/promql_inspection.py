"""Reading PromQL with a real parser: which metrics and selectors an expression uses."""

from __future__ import annotations

import re

import promql_parser

# The article's lab: dc1 and dc2 time-sliced x4, dc3 whole.
ARTICLE_NODES = {"rke2-worker-dc1-gpu-a": 4, "rke2-worker-dc2-gpu-a": 4, "rke2-worker-dc3-gpu-a": 1}
POD_LABELS = {"pod", "namespace", "container", "exported_pod", "exported_namespace", "exported_container"}


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def metric_names(expr: str) -> set[str]:
    """Metric names the expression selects, read from the parsed AST (`name` or a `__name__` matcher)."""
    names: set[str] = set()
    for selector in selectors(expr):
        if selector.name:
            names.add(selector.name)
        names |= {m.value for m in selector.matchers.matchers if m.name == "__name__"}
    return names


def dcgm_tokens(text: str) -> set[str]:
    """Every DCGM_FI_* token in the text, wherever it appears (also inside strings)."""
    return set(re.findall(r"DCGM_FI_[A-Z0-9_]+", text))


# Exporter images gpu-pool's counters file is built for: each chart's default (4.8 names) and a 4.9+ override (the
# newer names): knowledge/metric_names.py.
EXPORTER_VERSIONS = ("4.5.3-4.8.2-distroless", "4.6.0-4.8.3-distroless", "4.7.0-4.10.0-distroless")


def fields_never_emitted(names: set[str], emitted: frozenset[str]) -> list[str]:
    """The DCGM names read whose field the exporter emits under neither of its names (a panel saying 'No data')."""
    from knowledge.metric_names import contract_of

    dead: list[str] = []
    for name in sorted(names):
        metric = contract_of(name)
        if metric is None or not set(metric.names) & emitted:
            dead.append(name)
    return dead
