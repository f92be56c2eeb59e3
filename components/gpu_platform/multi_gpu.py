"""Honest multi-GPU requests: what the Kyverno policies need to know to keep a pod that asks for several GPUs off
time-sliced cards.

On a time-sliced node, `nvidia.com/gpu: 2` is two slices, which may be slices of the *same* card: the pod believes
it has two GPUs and gets one, shared. Only a domain whose sharing profile is whole (`replicas: 1`) advertises one
`nvidia.com/gpu` per physical card, so a pod asking for more than one is steered there (a required node affinity on
the node's `nvidia.com/device-plugin.config` label, which names its profile), and refused at admission when no whole
domain has that many cards: it could never be scheduled honestly.

The device plugin's `failRequestsGreaterThanOne` would refuse such pods on the node instead, but it is one switch
for the whole profile, and a multi-card domain's smoke Job (exempt here by its namespace and label) asks for all
its cards; docs/usage.md says why it stays false.

The count is what the scheduler counts (limits: an extended resource's request defaults to its limit): the app
containers' and sidecars' (init containers with `restartPolicy: Always`) GPUs together, or the largest plain init
container's, whichever is more.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.gpu_platform.kyverno_expressions import SPEC
from config.smoke_test import SMOKE_APP_LABEL
from config.stack import StackConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL

POLICY_NAME = "gpu-multi-gpu-pods-need-whole-cards"
RULE_NAME = "multi-gpu-pods-need-whole-cards"
STEERING_RULE_NAME = "require-whole-cards-for-several-gpus"
NODE_LABEL = DEVICE_PLUGIN_CONFIG_LABEL


@dataclass(frozen=True)
class WholeCards:
    """The stack's whole domains (by name, with their card counts) and the smoke Jobs' exemption."""

    profiles: tuple[str, ...]  # whole sharing profiles some domain uses, sorted
    domains: tuple[tuple[str, int], ...]  # (domain name, cards), sorted by name
    smoke_namespace: str

    @classmethod
    def of(cls, stack: StackConfig) -> WholeCards:
        whole = [d for d in stack.failure_domains if stack.sharing_profiles[d.sharing].replicas == 1]
        return cls(
            profiles=tuple(sorted({d.sharing for d in whole})),
            domains=tuple(sorted((d.name, len(d.cards)) for d in whole)),
            smoke_namespace=stack.smoke_test.namespace,
        )

    @property
    def most_cards(self) -> int:
        """The most GPUs one pod can honestly get; 0 without a whole domain."""
        return max((cards for _, cards in self.domains), default=0)

    @property
    def limit(self) -> int:
        """The most GPUs a pod may ask for: one is always honest (a slice is what it asked for)."""
        return max(1, self.most_cards)

    def refusal_text(self, resource: str) -> str:
        """Why, after "asks for N <resource>", and the fix."""
        if not self.domains:
            where = "no domain of this pool has a whole sharing profile (replicas: 1)"
        else:
            listed = ", ".join(f"{name} ({cards} card{'s' if cards > 1 else ''})" for name, cards in self.domains)
            where = f"the whole domains are {listed}"
        return (
            f": a pod that asks for more than one {resource} must run on a domain whose cards are whole, not "
            f"time-sliced (two slices may be the same card), and {where}; ask for at most {self.limit}, or give a "
            "domain with enough cards a whole profile"
        )


def smoke_label() -> dict[str, str]:
    return {SMOKE_APP_LABEL[0]: SMOKE_APP_LABEL[1]}


def gpu_total_expression(resource: str) -> str:
    """JMESPath: the GPUs the pod holds while it runs, as the scheduler counts them (module docstring)."""
    # to_string first: a limit written as a number (a manifest applied from a file) reaches Kyverno's JMESPath as an
    # integer, which its to_number turns into null, and sum() of a null fails the rule (kyverno apply v1.19.1).
    values = f'resources.limits."{resource}" | [].to_number(to_string(@))'
    init = f"({SPEC}.initContainers || `[]`)"
    running = f"sum([`0`, {SPEC}.containers[].{values}, {init}[?restartPolicy=='Always'].{values}][])"
    return f"max([{running}, max([`0`, {init}[?restartPolicy!='Always'].{values}][])])"


def gpu_total_cel(resource: str) -> str:
    """CEL: the same count as gpu_total_expression. Quantities may arrive as numbers from a file (the Kyverno CLI)
    or as canonical strings from the API server: string() takes both. Checked with cel-go v0.23.2 and the Kubernetes
    CEL libraries (k8s.io/apiserver v0.33.5) on the pods of tests/gpu_platform/test_multi_gpu_policy.py."""
    # dyn(): orValue('0') types the value a string to the checker, which would then bind string(string) alone and
    # fail at run time on a number.
    value = f"quantity(string(dyn(c.?resources.?limits['{resource}'].orValue('0')))).asInteger()"
    init = "object.spec.?initContainers.orValue([])"
    running = (
        f"([0] + object.spec.containers.map(c, {value})).sum()"
        f" + ([0] + {init}.filter(c, c.?restartPolicy.orValue('') == 'Always').map(c, {value})).sum()"
    )
    return (
        f"math.greatest({running}, math.greatest([0] + {init}.filter(c, c.?restartPolicy.orValue('') != 'Always')"
        f".map(c, {value})))"
    )
