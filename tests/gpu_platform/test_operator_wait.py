"""After the release, the platform waits for the GPU Operator itself, and says what it sees while it waits.

The script runs as pulumi-command runs it (`/bin/sh -c`), against a stand-in kubectl that answers from a
scenario; the e2e tier runs it with the real kubectl against a real API server.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from components.gpu_platform.operator_wait import operator_wait_command
from offline.recording import Recording

Run = Callable[..., Recording]
P = "gpu-platform"

# `rollout status` fails the first ROUNDS_BEFORE_READY calls with ROLLOUT_ERROR, then succeeds (if ever).
STUB = """#!/bin/sh
state="$STUB_DIR/rounds"
case "$*" in
  *"rollout status"*)
    n=$(cat "$state" 2>/dev/null || echo 0); echo $((n + 1)) > "$state"
    if [ "$n" -ge "$ROUNDS_BEFORE_READY" ]; then echo 'deployment "gpu-operator" successfully rolled out'; exit 0; fi
    echo 'Waiting for deployment "gpu-operator" rollout to finish: 0 of 1 updated replicas are available...'
    echo "$ROLLOUT_ERROR" >&2; exit 1 ;;
  *"get pods"*) printf '%s' "$PODS"; exit 0 ;;
esac
exit 1
"""


def wait(
    tmp_path: Path, *, rounds_before_ready: int, pods: str = "", error: str = ""
) -> subprocess.CompletedProcess[str]:
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(STUB, encoding="utf-8")
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    environment = {
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "STUB_DIR": str(tmp_path),
        "ROUNDS_BEFORE_READY": str(rounds_before_ready),
        "PODS": pods,
        "ROLLOUT_ERROR": error or "error: timed out waiting for the condition",
        # Rounds back to back, and the deadline reached after the first failed one.
        "GPU_POOL_PROGRESS_SECONDS": "0",
        "TIMEOUT_SECONDS": "0" if rounds_before_ready > 1_000 else "3600",
    }
    return subprocess.run(
        ["/bin/sh", "-c", operator_wait_command("kubectl", "gpu-operator")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_release_leaves_the_silent_helm_wait_to_a_step_that_reports(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    release, ready = recording.named(f"{P}-gpu-operator"), recording.named(f"{P}-gpu-operator-ready")
    assert release.inputs["skipAwait"] is True
    assert ready.type == "command:local:Command" and recording.urn_of(f"{P}-gpu-operator") in ready.dependencies
    # A chart bump rolls the operator: the wait runs again for the new one.
    assert ready.inputs["triggers"] == ["v26.7.0"]
    for domain in ("dc1", "dc2", "dc3"):
        assert recording.urn_of(f"{P}-gpu-operator-ready") in recording.named(f"{domain}-gpu-ready").dependencies


def test_the_wait_reports_each_round_with_kubectls_own_message_and_ends_when_the_operator_is_available(tmp_path):
    done = wait(tmp_path, rounds_before_ready=2, pods="gpu-operator-7d9f Pending ContainerCreating; ")

    assert done.returncode == 0, done.stderr
    rounds = [line for line in done.stdout.splitlines() if "still waiting" in line]
    assert len(rounds) == 2
    assert "0 of 1 updated replicas are available" in rounds[0]
    assert "operator pods: gpu-operator-7d9f Pending ContainerCreating" in rounds[0]
    assert done.stdout.rstrip().endswith('deployment "gpu-operator" successfully rolled out')


def test_an_operator_image_that_cannot_be_pulled_is_named_as_the_cause_when_the_wait_gives_up(tmp_path):
    failed = wait(tmp_path, rounds_before_ready=10_000, pods="gpu-operator-7d9f Pending ImagePullBackOff; ")

    assert failed.returncode == 1
    assert "deployment/gpu-operator in gpu-operator was not available" in failed.stderr
    assert "image cannot be pulled" in failed.stderr and "describe pods -l app=gpu-operator" in failed.stderr


def test_a_release_that_made_no_operator_deployment_points_at_helm(tmp_path):
    error = 'Error from server (NotFound): deployments.apps "gpu-operator" not found'
    failed = wait(tmp_path, rounds_before_ready=10_000, error=error)

    assert failed.returncode == 1
    assert "helm -n gpu-operator status gpu-operator" in failed.stderr
    assert "operator pods: none" in failed.stdout


def test_credentials_the_api_server_refuses_are_named_instead_of_a_fixed_guess(tmp_path):
    error = "error: You must be logged in to the server (Unauthorized)"
    failed = wait(tmp_path, rounds_before_ready=10_000, error=error)

    assert "refuses the kubeconfig's credentials" in failed.stderr and "(last: error: You must be" in failed.stderr
