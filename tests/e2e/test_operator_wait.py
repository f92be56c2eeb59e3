"""The platform's wait for the GPU Operator, run from the prod plan with the real kubectl against the real server.

There is no controller manager here: the Deployment's and the pod's status are set through the status subresource
as the Deployment controller and the kubelet would, so `kubectl rollout status` judges real objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from knowledge.gpu_operator_chart import OPERATOR_DEPLOYMENT, OPERATOR_POD_SELECTOR
from tests.e2e.kube import Kubectl
from tests.e2e.match_conditions import ensure_pod_namespace
from tests.e2e.stacks import Previewed
from tests.e2e.steps import StepRunner

STEP = "gpu-platform-gpu-operator-ready"
LABEL_KEY, LABEL_VALUE = OPERATOR_POD_SELECTOR.split("=")
# One real `rollout status --timeout=1s` round, and the deadline reached after it.
GIVE_UP = {"GPU_POOL_PROGRESS_SECONDS": "1", "TIMEOUT_SECONDS": "0"}


@pytest.fixture
def operator(kubectl: Kubectl, prod_stack: Previewed) -> Iterator[str]:
    """The chart's operator Deployment and one of its pods, as the release creates them, with no status yet."""
    namespace = prod_stack.config.gpu_operator.namespace
    ensure_pod_namespace(kubectl, namespace)
    labels = {LABEL_KEY: LABEL_VALUE}
    container = {"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v26.3.2"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": OPERATOR_DEPLOYMENT, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-operator-7d9f6c5b4-x2x9k", "namespace": namespace, "labels": labels},
        "spec": {"containers": [container]},
    }
    try:
        kubectl.create(deployment, field_manager="helm")
        kubectl.create(pod, field_manager="kube-controller-manager")
        yield namespace
    finally:
        for kind, name in (("deployment", OPERATOR_DEPLOYMENT), ("pod", pod["metadata"]["name"])):
            kubectl("-n", namespace, "delete", kind, name, "--ignore-not-found", "--grace-period=0", "--force")


def set_status(kubectl: Kubectl, namespace: str, kind: str, name: str, status: Mapping[str, Any]) -> None:
    current = kubectl.json("-n", namespace, "get", kind, name, "-o", "json")
    kubectl("replace", "--subresource=status", "-f", "-", stdin=json.dumps({**current, "status": status}))


@pytest.fixture
def prod(prod_stack: Previewed, step_runner_for: Callable[[Previewed], StepRunner]) -> StepRunner:
    return step_runner_for(prod_stack)


def test_an_operator_stuck_on_its_image_is_reported_by_kubectl_and_named_as_the_cause(
    prod: StepRunner, kubectl: Kubectl, operator: str
) -> None:
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}
    status: dict[str, Any] = {
        "phase": "Pending",
        "containerStatuses": [
            {"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v26.3.2", "imageID": "", "ready": False}
            | {"restartCount": 0, "state": waiting}
        ],
    }
    set_status(kubectl, operator, "pod", "gpu-operator-7d9f6c5b4-x2x9k", status)

    done = prod.command(STEP, **GIVE_UP)

    assert done.returncode == 1, done.stdout + done.stderr
    # kubectl's own words: with no controller yet, the Deployment's generation was never observed.
    assert "still waiting: Waiting for deployment spec update to be observed" in done.stdout
    assert "operator pods: gpu-operator-7d9f6c5b4-x2x9k Pending ImagePullBackOff" in done.stdout
    assert "image cannot be pulled" in done.stderr


def test_the_wait_ends_when_the_real_rollout_status_sees_the_operator_available(
    prod: StepRunner, kubectl: Kubectl, operator: str
) -> None:
    generation = kubectl.json("-n", operator, "get", "deployment", OPERATOR_DEPLOYMENT, "-o", "json")["metadata"][
        "generation"
    ]
    available = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
    status = {
        "observedGeneration": generation,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            available
            | {"lastUpdateTime": "2026-12-03T10:00:00Z", "lastTransitionTime": "2026-12-03T10:00:00Z", "message": "ok"}
        ],
    }
    set_status(kubectl, operator, "deployment", OPERATOR_DEPLOYMENT, status)

    done = prod.command(STEP, GPU_POOL_PROGRESS_SECONDS="5")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith('deployment "gpu-operator" successfully rolled out')
