"""The commands a day-2 turn runs on its Node: what they mark, in which order, and what they restart.
(They run for real against the e2e API server in tests/e2e/test_wave.py.)"""

from __future__ import annotations

import json
import shlex

import pytest

from components.gpu_failure_domain.observed import (
    ROLLOUT_ANNOTATION,
    WAVE_CORDON_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)
from components.gpu_failure_domain.rollout import (
    device_plugin_restart_command,
    rke2_upgrade_command,
    rollout_done_command,
    wave_drain_command,
)
from knowledge.gpu_operator import DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION


def test_the_rke2_upgrade_is_the_official_installer_at_the_pin_then_an_agent_restart() -> None:
    command = rke2_upgrade_command("v1.33.6+rke2r1")
    assert command.startswith("set -e; curl -sfL https://get.rke2.io -o /tmp/install-rke2.sh; ")
    assert "sudo INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION=v1.33.6+rke2r1 sh /tmp/install-rke2.sh" in command
    assert command.index("sh /tmp/install-rke2.sh") < command.index("systemctl restart rke2-agent")


def test_the_drain_marks_the_node_as_the_waves_only_when_it_cordons_it_and_always_records_the_turns_start() -> None:
    drain = wave_drain_command("n1", "kubectl", "dc1")
    schedulable, _, rest = drain.partition("; else ")
    mine = json.loads(shlex.split(schedulable.split("printf ", 1)[1])[0])
    theirs = json.loads(shlex.split(rest.split("printf ", 1)[1])[0])
    # The operator's own initial-state mark rides in the same patch: its upgrade controller then leaves the node
    # cordoned after swapping the driver, for the turn's gate and last step to uncordon.
    assert mine == {
        "metadata": {
            "annotations": {
                WAVE_CORDON_ANNOTATION: "dc1",
                WAVE_TURN_ANNOTATION: "%s",
                DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true",
            }
        },
        "spec": {"unschedulable": True},
    }
    assert theirs == {
        "metadata": {"annotations": {WAVE_TURN_ANNOTATION: "%s", DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true"}}
    }
    assert "if [ \"$(kubectl get node n1 -o jsonpath='{.spec.unschedulable}')\" != true ]" in drain
    assert drain.index("patch node n1") < drain.index("drain n1 --ignore-daemonsets --delete-emptydir-data")
    # A drain that does not finish leaves the node cordoned, saying why.
    assert drain.endswith(
        "--timeout=15m || { kubectl annotate node n1 --overwrite 'gpu-pool.dev/wave-stopped=drain did not finish "
        "within 15m: kubectl get pods -A --field-selector spec.nodeName=n1; kubectl get pdb -A' >/dev/null; exit 1; }"
    )


def test_the_last_step_records_ends_the_turn_and_uncordons_only_a_node_the_wave_cordoned_in_one_patch() -> None:
    done = rollout_done_command("n1", "kubectl", {"rke2": "v1"})
    ours, _, theirs = done.partition("; else ")
    assert "jsonpath='{.metadata.annotations.gpu-pool\\.dev/wave-cordoned}'" in ours
    patches = [json.loads(shlex.split(part.split(" -p ", 1)[1])[0]) for part in (ours, theirs)]
    record = json.dumps({"rke2": "v1"}, separators=(",", ":"))
    ended = {
        ROLLOUT_ANNOTATION: record,
        WAVE_TURN_ANNOTATION: None,
        WAVE_STOPPED_ANNOTATION: None,
        DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: None,
    }
    assert patches[0] == {
        "metadata": {"annotations": {**ended, WAVE_CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }
    assert patches[1] == {"metadata": {"annotations": ended}}
    assert "uncordon" not in done


def test_a_profile_edit_restarts_gpu_feature_discovery_with_the_device_plugin_on_that_node_only() -> None:
    """FIELD-REVIEW-4 WRONG-5: GFD's config-manager, like the plugin's, rereads the profile only when it starts."""
    command = device_plugin_restart_command("n1", "kubectl", "gpu-operator")
    assert command == (
        "kubectl -n gpu-operator delete pod -l 'app in (nvidia-device-plugin-daemonset,gpu-feature-discovery)' "
        "--field-selector spec.nodeName=n1 --wait=true --timeout=5m"
    )


STAND_IN_KUBECTL = """#!/bin/sh
# A stand-in kubectl for the drain command: answers the Node's Ready status and cordon from the environment, and
# journals every call.
echo "kubectl $*" >> "$JOURNAL"
case "$*" in
  *"get node"*"Ready"*) printf '%s' "$READY" ;;
  *"get node"*"unschedulable"*) printf '' ;;
esac
exit 0
"""


def run_drain(tmp_path, ready: str) -> tuple[int, list[str], str]:
    import os
    import subprocess

    kubectl = tmp_path / "kubectl"
    kubectl.write_text(STAND_IN_KUBECTL)
    kubectl.chmod(0o755)
    journal = tmp_path / "journal"
    journal.write_text("")
    done = subprocess.run(
        ["/bin/sh", "-c", wave_drain_command("n1", str(kubectl), "dc1")],
        env={**os.environ, "JOURNAL": str(journal), "READY": ready},
        capture_output=True,
        text=True,
        check=False,
    )
    calls = [line.replace(str(kubectl), "kubectl") for line in journal.read_text().splitlines()]
    return done.returncode, calls, done.stderr


@pytest.mark.parametrize("ready", ["False", "Unknown", ""], ids=["Ready False", "Ready Unknown", "no Ready condition"])
def test_a_turn_on_a_node_that_is_not_ready_stops_before_its_drain_and_the_node_says_how_to_bring_it_back(
    tmp_path, ready: str
) -> None:
    """FIELD-REVIEW-5 WRONG-3: the drain used to run against an unreachable kubelet and wait out its 15 minutes."""
    code, calls, stderr = run_drain(tmp_path, ready)

    assert code == 1
    assert not any(" drain " in call or " patch " in call for call in calls), calls
    (annotate,) = [call for call in calls if " annotate node n1 " in call]
    assert f"{WAVE_STOPPED_ANNOTATION}=not Ready (Ready={ready}): the turn stopped before its drain" in annotate
    assert "gpu-pool repair n1 --stack STACK" in annotate and "wait for it to be Ready" in annotate
    assert "gpu-pool: n1 is not Ready" in stderr


def test_a_turn_on_a_ready_node_cordons_and_drains_it(tmp_path) -> None:
    code, calls, _ = run_drain(tmp_path, "True")

    assert code == 0
    assert [call.split()[1] for call in calls] == ["get", "get", "patch", "drain"]
