"""A policy's `webhookConfiguration.matchConditions`, evaluated by the real API server: which requests reach Kyverno.

In a cluster it is the API server that evaluates them: Kyverno copies them into the webhook configuration it
registers for the policy, and the server calls Kyverno only when all are true (the Kyverno CLI cannot load them
at all, see kyverno_cli.py). Here they go, verbatim, into a MutatingWebhookConfiguration of their own whose URL is a
loopback port nothing listens on, with failurePolicy Fail: a server-side dry run the server refuses with "failed
calling webhook" is a request that would have reached Kyverno; one it accepts is a request that would not. Dry runs
call webhooks whose sideEffects are None, and an objectSelector on a label only the probed objects carry keeps every
other object of the session out of the probe.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.kube import Kubectl, KubectlError
from tests.e2e.servers import free_ports

PROBE_LABEL = "e2e.gpu-pool.io/match-condition-probe"
WEBHOOK = "kyverno-stand-in.e2e.gpu-pool.io"
# The server reads webhook configurations through an informer: a new one takes effect within a second or so.
ACTIVE_SECONDS = 30


def webhook_rule(resource: str, *operations: str) -> dict[str, Any]:
    """An admission rule for a core (v1) resource, e.g. ("pods", "CREATE")."""
    return {"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations), "resources": [resource]}


def ensure_pod_namespace(kubectl: Kubectl, name: str) -> None:
    """A namespace pods can be created in here: with its `default` ServiceAccount, which no controller-manager
    creates in this cluster and the ServiceAccount admission plugin requires."""
    kubectl.ensure_namespace(name)
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}
    kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(account))


@dataclass(frozen=True)
class Probe:
    """One probe: objects carry its label (`label`) and its webhook (`webhook`) sees only them."""

    kubectl: Kubectl
    token: str = field(default_factory=lambda: secrets.token_hex(6))

    def label(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object with the probe's label, so the probe's objectSelector lets it in."""
        labelled: dict[str, Any] = json.loads(json.dumps(obj))
        labelled["metadata"].setdefault("labels", {})[PROBE_LABEL] = self.token
        return labelled

    def _verdict(self, what: str, done: subprocess.CompletedProcess[str]) -> bool:
        if done.returncode == 0:
            return False
        if f'failed calling webhook "{WEBHOOK}"' in done.stderr:
            return True
        # Anything else (a matchCondition that fails to evaluate, an invalid object) is the server's finding.
        raise KubectlError(f"{what}: refused for another reason than the webhook call:\n{done.stderr.strip()}")

    def create_reaches_kyverno(self, obj: Mapping[str, Any]) -> bool:
        """Would creating `obj` (labelled for the probe here) be sent to Kyverno?"""
        done = self.kubectl.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(self.label(obj)))
        return self._verdict(f"create {obj['kind']} {obj['metadata']['name']}", done)

    def reaches_kyverno(self, *kubectl_args: str) -> bool:
        """Would this kubectl call (an update or delete of an object created with `label`) be sent to Kyverno?"""
        done = self.kubectl.run(*kubectl_args, "--dry-run=server")
        return self._verdict(" ".join(kubectl_args), done)

    @contextlib.contextmanager
    def webhook(
        self, policy: Mapping[str, Any], rules: list[dict[str, Any]], control: Mapping[str, Any]
    ) -> Iterator[None]:
        """The policy's matchConditions in a fail-closed webhook to nowhere, registered for `rules`, in effect (the
        `control` object, which must reach Kyverno, is refused) until the block ends."""
        name = f"e2e-probe-{policy['metadata']['name']}-{self.token}"
        (port,) = free_ports(1)  # closed again at once: nothing listens there
        configuration = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": WEBHOOK,
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate"},
                    "rules": rules,
                    "matchConditions": policy["spec"]["webhookConfiguration"]["matchConditions"],
                    "objectSelector": {"matchLabels": {PROBE_LABEL: self.token}},
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                }
            ],
        }
        self.kubectl.create(configuration, field_manager="e2e-setup")
        try:
            deadline = time.monotonic() + ACTIVE_SECONDS
            while not self.create_reaches_kyverno(control):
                if time.monotonic() > deadline:
                    raise AssertionError(f"webhook {name} not in effect after {ACTIVE_SECONDS} s")
                time.sleep(0.1)  # poll interval; the deadline above bounds the wait
            yield
        finally:
            self.kubectl("delete", "mutatingwebhookconfiguration", name)
