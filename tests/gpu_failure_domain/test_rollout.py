"""The commands a day-2 turn runs on its Node: what they mark, in which order, and what they restart.
(They run for real against the e2e API server in tests/e2e/test_wave.py.)"""

from __future__ import annotations

import json
import shlex
from typing import Any

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
    cordon = drain[drain.index("patch=$(printf ") :]
    schedulable, _, rest = cordon.partition("; else ")
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
    done_label = {"gpu-pool.dev/turn-state": "done"}
    assert patches[0] == {
        "metadata": {"labels": done_label, "annotations": {**ended, WAVE_CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }
    assert patches[1] == {"metadata": {"labels": done_label, "annotations": ended}}
    assert "uncordon" not in done


def test_a_profile_edit_restarts_gpu_feature_discovery_with_the_device_plugin_on_that_node_only() -> None:
    """FIELD-REVIEW-4 WRONG-5: GFD's config-manager, like the plugin's, rereads the profile only when it starts."""
    command = device_plugin_restart_command("n1", "kubectl", "gpu-operator")
    assert command == (
        "kubectl -n gpu-operator delete pod -l 'app in (nvidia-device-plugin-daemonset,gpu-feature-discovery)' "
        "--field-selector spec.nodeName=n1 --wait=true --timeout=5m"
    )


STAND_IN_KUBECTL = """#!{python}
# A stand-in kubectl for the drain command: one Node in a JSON file, read with the jsonpaths the command uses,
# changed by merge patches and annotate; every call journaled with the node's skip label at that moment.
import json, os, sys, time
args = sys.argv[1:]
path = os.environ["NODE_FILE"]
node = json.load(open(path))
meta = node.setdefault("metadata", {{}})
labels, notes = meta.setdefault("labels", {{}}), meta.setdefault("annotations", {{}})
skip = labels.get("nvidia.com/gpu-driver-upgrade.skip", "")
cordoned = bool(node.get("spec", {{}}).get("unschedulable"))
with open(os.environ["JOURNAL"], "a") as journal:
    journal.write(json.dumps({{"args": args, "skip": skip, "cordoned": cordoned}}) + "\\n")
def merge(into, patch):
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict):
            merge(into.setdefault(key, {{}}), value)
        else:
            into[key] = value
rv = str(meta.get("resourceVersion") or "1")
meta["resourceVersion"] = rv
if args[0] == "get":
    query = args[-1]
    if "resourceVersion" in query:
        state, holder = labels.get("gpu-pool.dev/turn-state", ""), notes.get("gpu-pool.dev/turn-holder", "")
        print(rv + "|" + state + "|" + holder, end="")
        if os.environ.get("RACE"):
            # Another writer takes the node between this read and the hold's patch.
            meta["resourceVersion"] = str(int(rv) + 1)
    elif "Ready" in query:
        print(os.environ.get("READY", "True"), end="")
    elif "unschedulable" in query:
        print("true" if node.get("spec", {{}}).get("unschedulable") else "", end="")
    elif "driver-upgrade\\\\.skip" in query:
        print(skip, end="")
    elif "driver-upgrade-held" in query:
        print(notes.get("gpu-pool.dev/driver-upgrade-held", ""), end="")
elif args[0] == "patch":
    patch = json.loads(args[args.index("-p") + 1])
    wanted = patch.get("metadata", {{}}).pop("resourceVersion", None)
    if wanted is not None and wanted != rv:
        print("Error from server (Conflict): the object has been modified", file=sys.stderr)
        sys.exit(1)
    merge(node, patch)
    meta["resourceVersion"] = str(int(rv) + 1)
elif args[0] == "label":
    key, _, value = args[-1].partition("=")
    labels[key] = value
elif args[0] == "annotate":
    key, _, value = args[-1].partition("=")
    notes[key] = value
elif args[0] == "drain":
    if os.environ.get("DRAIN_WAITS"):
        # kubectl drain's words while a PodDisruptionBudget refuses (kubectl pkg/drain/drain.go evictPods), then
        # it waits until the test lets it finish.
        print('evicting pod team-a/trainer-1', flush=True)
        print('error when evicting pods/"trainer-1" -n "team-a" (will retry after 5s): Cannot evict pod as it '
              "would violate the pod's disruption budget.", file=sys.stderr, flush=True)
        while not os.path.exists(os.environ["DRAIN_WAITS"]):
            time.sleep(0.05)
        print("node/n1 drained", flush=True)
    if os.environ.get("DRAIN_FAILS"):
        # kubectl drain's own words for a bare pod (kubectl pkg/drain/filters.go unreplicatedFilter, drain.go).
        print('error: unable to drain node "n1" due to error: cannot delete Pods that declare no controller '
              '(use --force to override): team-a/bare-gpu, continuing command...', file=sys.stderr)
        print("There are pending nodes to be drained:", file=sys.stderr)
        print(" n1", file=sys.stderr)
        print("error: cannot delete Pods that declare no controller (use --force to override): team-a/bare-gpu",
              file=sys.stderr)
        sys.exit(1)
json.dump(node, open(path, "w"))
"""


def run_drain(
    tmp_path,
    ready: str = "True",
    labels: dict[str, str] | None = None,
    drain_fails: bool = False,
    node: dict[str, Any] | None = None,
    holder: str = "up:prod",
    race: bool = False,
) -> tuple[int, list[dict[str, Any]], str, dict[str, Any]]:
    """The drain command run by /bin/sh against the stand-in: (exit code, calls, stderr, the Node after)."""
    import os
    import subprocess
    import sys

    kubectl = tmp_path / "kubectl"
    kubectl.write_text(STAND_IN_KUBECTL.format(python=sys.executable))
    kubectl.chmod(0o755)
    journal, node_file = tmp_path / "journal", tmp_path / "node.json"
    journal.write_text("")
    start = node or {"metadata": {"name": "n1", "labels": labels or {}, "annotations": {}}, "spec": {}}
    node_file.write_text(json.dumps(start))
    done = subprocess.run(
        ["/bin/sh", "-c", wave_drain_command("n1", str(kubectl), "dc1", holder)],
        env={
            **os.environ,
            "JOURNAL": str(journal),
            "NODE_FILE": str(node_file),
            "READY": ready,
            **({"DRAIN_FAILS": "1"} if drain_fails else {}),
            **({"RACE": "1"} if race else {}),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    calls = [json.loads(line) for line in journal.read_text().splitlines()]
    return done.returncode, calls, done.stderr, json.loads(node_file.read_text())


@pytest.mark.parametrize("ready", ["False", "Unknown", ""], ids=["Ready False", "Ready Unknown", "no Ready condition"])
def test_a_turn_on_a_node_that_is_not_ready_stops_before_its_drain_and_the_node_says_how_to_bring_it_back(
    tmp_path, ready: str
) -> None:
    """FIELD-REVIEW-5 WRONG-3: the drain used to run against an unreachable kubelet and wait out its 15 minutes."""
    code, calls, stderr, after = run_drain(tmp_path, ready)

    assert code == 1
    assert not any(call["args"][0] == "drain" or call["cordoned"] for call in calls), calls
    assert after["metadata"]["labels"]["gpu-pool.dev/turn-state"] == "stopped"
    stopped = after["metadata"]["annotations"][WAVE_STOPPED_ANNOTATION]
    assert stopped.startswith(f"not Ready (Ready={ready}): the turn stopped before its drain")
    assert "gpu-pool repair n1 --stack STACK" in stopped and "wait for it to be Ready" in stopped
    assert "gpu-pool: n1 is not Ready" in stderr
    assert not after.get("spec", {}).get("unschedulable")


def test_the_operator_is_held_off_the_node_from_before_the_cordon_until_the_waves_drain_is_done(tmp_path) -> None:
    """FIELD-REVIEW-5 WRONG-1: with no slots of its own the operator's upgrade controller starts on every cordoned
    node, and its own pod deletion races the wave's drain."""
    code, calls, _, after = run_drain(tmp_path)

    assert code == 0
    (drain,) = [call for call in calls if call["args"][0] == "drain"]
    assert drain["skip"] == "true" and drain["cordoned"]
    # No moment where the node is cordoned and the operator not held off.
    assert all(call["skip"] == "true" for call in calls if call["cordoned"] and call is not calls[-1])
    # After the drain the label the wave set is gone, with its mark.
    assert "nvidia.com/gpu-driver-upgrade.skip" not in after["metadata"]["labels"]
    assert "gpu-pool.dev/driver-upgrade-held" not in after["metadata"]["annotations"]
    assert after["spec"]["unschedulable"] is True


def test_a_skip_label_an_admin_set_is_kept_after_the_waves_drain(tmp_path) -> None:
    code, _, _, after = run_drain(tmp_path, labels={"nvidia.com/gpu-driver-upgrade.skip": "true"})

    assert code == 0
    assert after["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade.skip"] == "true"
    assert "gpu-pool.dev/driver-upgrade-held" not in after["metadata"]["annotations"]


def test_a_drain_that_fails_keeps_the_operator_held_off_and_a_resumed_drain_releases_it(tmp_path) -> None:
    code, _, _, after = run_drain(tmp_path, drain_fails=True)

    assert code == 1
    assert after["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade.skip"] == "true"
    assert after["metadata"]["annotations"]["gpu-pool.dev/driver-upgrade-held"] == "dc1"
    stopped = after["metadata"]["annotations"][WAVE_STOPPED_ANNOTATION]
    assert stopped.startswith(
        "the drain failed (it waits up to 15m for evictions): error: cannot delete Pods that declare no controller "
        "(use --force to override): team-a/bare-gpu; kubectl get pods -A --field-selector spec.nodeName=n1"
    )

    # The resumed turn's drain, on the node as the failed one left it (the label the wave's, by its mark).
    (tmp_path / "again").mkdir()
    code, calls, _, resumed = run_drain(tmp_path / "again", node=after)
    assert code == 0
    (drain,) = [call for call in calls if call["args"][0] == "drain"]
    assert drain["skip"] == "true"
    assert "nvidia.com/gpu-driver-upgrade.skip" not in resumed["metadata"]["labels"]
    assert "gpu-pool.dev/driver-upgrade-held" not in resumed["metadata"]["annotations"]


def test_a_drain_that_waits_on_a_budget_says_so_while_it_waits_and_finishes_when_allowed(tmp_path) -> None:
    """The wave's drain kept kubectl's stderr for its note and showed it only at the end: a drain waiting 15 minutes
    on a PodDisruptionBudget said nothing while it waited (seen on the e2e tier's kube-apiserver)."""
    import os
    import select
    import subprocess
    import sys

    kubectl = tmp_path / "kubectl"
    kubectl.write_text(STAND_IN_KUBECTL.format(python=sys.executable))
    kubectl.chmod(0o755)
    (tmp_path / "journal").write_text("")
    (tmp_path / "node.json").write_text(json.dumps({"metadata": {"name": "n1"}, "spec": {}}))
    allowed = tmp_path / "allowed"
    env = {
        **os.environ,
        "JOURNAL": str(tmp_path / "journal"),
        "NODE_FILE": str(tmp_path / "node.json"),
        "READY": "True",
        "DRAIN_WAITS": str(allowed),
    }
    drain = subprocess.Popen(
        ["/bin/sh", "-c", wave_drain_command("n1", str(kubectl), "dc1", "up:prod")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert drain.stderr is not None and drain.stdout is not None
        # Wait for the drain's stderr with a limit: the old command held it back until the drain ended.
        readable = select.select([drain.stderr], [], [], 30)[0]
        assert readable, "the drain showed nothing while it waited"
        refused = drain.stderr.readline()
        assert "Cannot evict pod as it would violate the pod's disruption budget" in refused
        assert drain.poll() is None, "still draining when the refusal is read"
        allowed.touch()
        out, err = drain.communicate(timeout=60)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    assert drain.returncode == 0, err
    assert "evicting pod team-a/trainer-1" in out and "node/n1 drained" in out
    after = json.loads((tmp_path / "node.json").read_text())
    assert WAVE_STOPPED_ANNOTATION not in after["metadata"]["annotations"]


def held(state: str, holder: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n1",
            "resourceVersion": "7",
            "labels": {"gpu-pool.dev/turn-state": state},
            "annotations": {"gpu-pool.dev/turn-holder": f"{holder} since 2026-12-05T10:00:00Z"},
        },
        "spec": {},
    }


def test_a_turn_takes_the_hold_and_shows_its_state_on_the_node(tmp_path) -> None:
    code, _, _, after = run_drain(tmp_path, holder="up:prod")

    assert code == 0
    assert after["metadata"]["labels"]["gpu-pool.dev/turn-state"] == "changing"
    assert after["metadata"]["annotations"]["gpu-pool.dev/turn-holder"].startswith("up:prod since ")


@pytest.mark.parametrize(
    ("state", "holder", "me"),
    [
        ("repairing", "repair:alice@laptop", "up:prod"),
        ("stopped", "repair:alice@laptop", "up:prod"),
        ("gating", "up:prod", "repair:bob@desk"),
        ("draining", "up:staging", "up:prod"),
    ],
    ids=[
        "a wave on a node a repair works on",
        "a wave on a node whose repair stopped",
        "a repair on a node a wave gates",
        "another stack's wave",
    ],
)
def test_a_turn_on_a_node_another_holder_has_changes_nothing_and_names_the_holder(
    tmp_path, state: str, holder: str, me: str
) -> None:
    """FIELD-REVIEW-5 H2: `pulumi up` and `gpu-pool repair` shared the turn marks with no exclusion; an up during a
    repair uncordoned the node before the repair's own checks ran."""
    code, calls, stderr, after = run_drain(tmp_path, node=held(state, holder), holder=me)

    assert code == 1
    assert [call["args"][0] for call in calls] == ["get"]
    assert after == held(state, holder)
    assert f"gpu-pool: n1 is held by {holder} since 2026-12-05T10:00:00Z (turn-state {state})" in stderr
    assert "kubectl label node n1 --overwrite gpu-pool.dev/turn-state=done" in stderr


@pytest.mark.parametrize(
    ("state", "holder", "me"),
    [("stopped", "up:prod", "repair:bob@desk"), ("stopped", "up:prod", "up:prod"), ("done", "repair:a@b", "up:prod")],
    ids=["a repair takes a stopped wave's node", "the same stack resumes its stopped turn", "a finished repair's"],
)
def test_a_hold_no_one_works_on_is_taken(tmp_path, state: str, holder: str, me: str) -> None:
    code, _, _, after = run_drain(tmp_path, node=held(state, holder), holder=me)

    assert code == 0
    assert after["metadata"]["annotations"]["gpu-pool.dev/turn-holder"].startswith(f"{me} since ")


def test_a_holder_that_takes_the_node_between_the_check_and_the_patch_makes_the_turn_fail(tmp_path) -> None:
    code, calls, stderr, after = run_drain(tmp_path, race=True)

    assert code == 1
    assert "gpu-pool: n1 changed while its hold was taken (another holder?)" in stderr
    assert not any(call["args"][0] == "drain" for call in calls)
    assert "gpu-pool.dev/turn-state" not in after["metadata"]["labels"]
