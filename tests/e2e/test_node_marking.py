"""Each GPU worker, registered as RKE2 registers it, ends up marked exactly as the stack promises.

The real steps run against the real API server with the built kubectl: node-ready and the taint as
pulumi-command runs them (plan.json), the labels as pulumi-kubernetes' NodePatch applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from components.gpu_failure_domain.node_metadata import node_labels
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import FOREIGN_TAINT, add_foreign_taint, kubelet_labels, labels_and_taints, registered_nodes
from tests.e2e.stacks import Previewed
from tests.e2e.steps import StepRunner


@dataclass(frozen=True)
class Converged:
    runner: StepRunner
    # Per node: labels, taints, resourceVersion after the first run.
    first: dict[str, tuple[dict[str, str], list[dict[str, str]], str]]


@pytest.fixture(scope="module", params=["prod", "options"])
def converged(
    request: pytest.FixtureRequest, kubectl: Kubectl, step_runner_for: Callable[[Previewed], StepRunner]
) -> Iterator[Converged]:
    stack: Previewed = request.getfixturevalue(f"{request.param}_stack")
    runner = step_runner_for(stack)
    with registered_nodes(kubectl, stack) as names:
        for name in names:
            add_foreign_taint(kubectl, name)
        for domain in stack.config.failure_domains:
            runner.converge(domain)
        yield Converged(runner, {name: labels_and_taints(kubectl, name) for name in names})


def test_each_worker_ends_with_exactly_the_labels_the_stack_promises(converged: Converged) -> None:
    stack = converged.runner.stack
    for domain in stack.config.failure_domains:
        labels, _, _ = converged.first[domain.hostname]
        assert labels == kubelet_labels(domain.hostname) | node_labels(domain, stack.marking)


def test_each_worker_carries_the_gpu_taint_once_beside_the_taints_other_controllers_own(converged: Converged) -> None:
    marking = converged.runner.stack.marking
    gpu_taint = {"key": marking.taint_key, "value": marking.taint_value, "effect": marking.taint_effect}
    for _, taints, _ in converged.first.values():
        assert taints == sorted([gpu_taint, FOREIGN_TAINT], key=lambda taint: taint["key"])


def test_running_the_steps_again_changes_nothing_on_any_node(converged: Converged, kubectl: Kubectl) -> None:
    for domain in converged.runner.stack.config.failure_domains:
        converged.runner.converge(domain)
    assert {name: labels_and_taints(kubectl, name) for name in converged.first} == converged.first
