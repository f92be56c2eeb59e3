"""Day-2 waves from the resource graph: one domain after another where there is something to roll, in the
stated order, resumable, and never on a first install."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.gpu_failure_domain.rollout import DeployedNode, pending_changes, plan_waves, rollout_state
from config.loader import validate_stack
from offline.critical_path import critical_path_length
from offline.diff import DiffError, compare_configs, deployed_from
from offline.recording import Recording
from offline.render import plan
from offline.runner import PROJECT, read_stack_file, run_stack
from tests.offline.test_plan_diff import KEY, all_domains

Config = dict[str, Any]


def prod() -> Config:
    config = copy.deepcopy(read_stack_file("prod"))
    all_domains(config, {"sshAuthorizedKeys": [KEY]})
    return config


def bumped(version: str = "v1.33.6+rke2r1", **rollout: Any) -> Config:
    config = prod()
    config["gpu-pool:rke2"]["version"] = version
    if rollout:
        config["gpu-pool:rollout"] = rollout
    return config


def cross_domain_waits(recording: Recording) -> dict[str, list[str]]:
    """Each resource that waits for another domain's resource, from the registrations' dependencies."""
    by_urn = {r.urn: r for r in recording.registrations}
    waits: dict[str, list[str]] = {}
    for r in recording.registrations:
        own = r.name.split("-")[0]
        others = [by_urn[u].name for u in r.dependencies if u in by_urn and by_urn[u].name.split("-")[0] not in (own,)]
        others = [o for o in others if o.startswith("dc")]
        if others and own.startswith("dc"):
            waits[r.name] = sorted(others)
    return waits


def test_a_first_install_has_no_wait_across_domains_so_it_stays_parallel() -> None:
    recording = run_stack("prod", config=prod())
    assert cross_domain_waits(recording) == {}
    assert "wave" not in recording.stack_outputs


def test_an_rke2_bump_drains_each_domain_only_after_the_previous_one_is_uncordoned() -> None:
    comparison = compare_configs("prod", prod(), bumped())
    assert comparison.wave is not None
    assert comparison.wave.batches == [["dc1"], ["dc2"], ["dc3"]]
    assert {name: turn.waits_for for name, turn in comparison.wave.domains.items()} == {
        "dc1": [],
        "dc2": ["dc1"],
        "dc3": ["dc2"],
    }
    assert comparison.wave.domains["dc2"].steps == ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate", "rollout"]


def test_rollout_order_and_max_unavailable_set_the_batches() -> None:
    comparison = compare_configs("prod", prod(), bumped(order=["dc3"], maxUnavailable=2))
    assert comparison.wave is not None
    assert comparison.wave.batches == [["dc3", "dc1"], ["dc2"]]
    assert comparison.wave.domains["dc2"].waits_for == ["dc1", "dc3"]
    assert comparison.wave.domains["dc1"].waits_for == []


def test_the_wave_graph_puts_every_disruptive_step_of_a_domain_after_the_previous_domains_last_step() -> None:
    from offline.diff import _deployed

    with _deployed(deployed_from(prod())):
        recording = run_stack("prod", config=bumped())
    waits = cross_domain_waits(recording)
    assert waits == {
        "dc2-rke2-login": ["dc1-rollout"],
        "dc2-wave-drain": ["dc1-rollout"],
        "dc3-rke2-login": ["dc2-rollout"],
        "dc3-wave-drain": ["dc2-rollout"],
    }
    assert recording.urn_of("dc2-rke2-login") in recording.named("dc2-wave-drain").dependencies
    upgrade = recording.named("dc2-rke2-upgrade")
    assert recording.urn_of("dc2-wave-drain") in upgrade.dependencies
    rollout = recording.named("dc2-rollout")
    assert recording.urn_of("dc2-wave-gate") in rollout.dependencies
    # The turn's gate makes the critical path grow with the pool only in a wave, never on a first install.
    assert critical_path_length(plan(recording, PROJECT, "prod")) > critical_path_length(
        plan(run_stack("prod", config=prod()), PROJECT, "prod")
    )


def test_a_wave_that_stopped_at_a_domain_resumes_there_and_leaves_the_done_ones_alone() -> None:
    after = validate_stack({k.split(":", 1)[1]: v for k, v in bumped().items() if k.startswith("gpu-pool:")})
    before = deployed_from(prod())
    done = {name: DeployedNode(entry["rollout"], entry["kubeletVersion"]) for name, entry in before.items()}
    by_name = {d.name: d for d in after.failure_domains}
    done["dc1"] = DeployedNode(rollout_state(by_name["dc1"], after), "v1.33.6+rke2r1")
    waves = plan_waves(after, done)
    assert waves.batches == [["dc2"], ["dc3"]]
    assert waves.changes == {"dc2": ["rke2"], "dc3": ["rke2"]}


def test_a_node_from_before_waves_rolls_only_what_it_shows_its_kubelet_version() -> None:
    desired = {"rke2": "v1.33.6+rke2r1", "kernel": "", "vm": "x", "driver": "d", "sharing": "s"}
    assert pending_changes(desired, DeployedNode(None, "v1.33.5+rke2r1")) == ["rke2"]
    assert pending_changes(desired, DeployedNode(None, "v1.33.6+rke2r1")) == []
    assert pending_changes(desired, None) == []


def test_a_worker_upgraded_by_hand_is_not_upgraded_again_but_its_other_changes_still_roll() -> None:
    desired = {"rke2": "v1.33.6+rke2r1", "kernel": "", "vm": "x", "driver": "d2", "sharing": "s"}
    recorded = {**desired, "rke2": "v1.33.5+rke2r1", "driver": "d1"}
    assert pending_changes(desired, DeployedNode(recorded, "v1.33.6+rke2r1")) == ["driver"]
    assert pending_changes(desired, DeployedNode(recorded, None)) == ["rke2", "driver"]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("v1.35.0+rke2r1", "more than one minor from v1.33.5+rke2r1, which domains dc1, dc2, dc3 run"),
        ("v1.32.9+rke2r1", "older than v1.33.5+rke2r1, which domains dc1, dc2, dc3 run"),
    ],
    ids=["a jump of two minors", "a downgrade"],
)
def test_an_rke2_pin_the_version_skew_policy_forbids_is_refused_at_preview(version: str, message: str) -> None:
    with pytest.raises(DiffError) as error:
        compare_configs("prod", prod(), bumped(version))
    assert message in str(error.value) and str(error.value).count("gpu-pool:") == 1


def test_an_rke2_upgrade_on_a_domain_without_an_ssh_key_is_refused_naming_the_domain() -> None:
    before, after = copy.deepcopy(read_stack_file("prod")), copy.deepcopy(read_stack_file("prod"))
    after["gpu-pool:rke2"]["version"] = "v1.33.6+rke2r1"
    with pytest.raises(DiffError, match=r"failureDomains\[dc1\]\.sshAuthorizedKeys: the RKE2 upgrade"):
        compare_configs("prod", before, after)


def test_a_worker_pin_newer_than_the_servers_is_refused_by_the_cluster_preflight(monkeypatch) -> None:
    from components.gpu_failure_domain.rollout_state import ClusterState, rke2_problems

    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in bumped("v1.34.1+rke2r1").items()})
    problems = rke2_problems(cfg, ClusterState({}, "v1.33.5+rke2r1"), plan_waves(cfg, {}))
    assert problems == [
        "gpu-pool:rke2.version: v1.34.1+rke2r1 is newer than the cluster's servers (v1.33.5+rke2r1); a kubelet must "
        "not be newer than kube-apiserver (Kubernetes version-skew policy): upgrade the servers first, then the "
        "workers"
    ]


@pytest.mark.parametrize(
    ("rollout", "message"),
    [
        ({"order": ["dc9"]}, "gpu-pool:rollout.order: 'dc9' is not a failure domain"),
        ({"order": ["dc1", "dc1"]}, "gpu-pool:rollout.order: 'dc1' is listed 2 times"),
        ({"maxUnavailable": 4}, "gpu-pool:rollout.maxUnavailable: 4 is more than the 3 failure domains"),
        ({"maxUnavailable": 0}, "gpu-pool:rollout.maxUnavailable"),
    ],
    ids=["an unknown domain", "a domain twice", "more than the pool", "zero"],
)
def test_a_rollout_setting_that_cannot_be_a_wave_is_refused_naming_the_key(
    rollout: dict[str, Any], message: str
) -> None:
    from config.errors import ConfigError

    raw = {k.split(":", 1)[1]: v for k, v in prod().items()} | {"rollout": rollout}
    with pytest.raises(ConfigError) as error:
        validate_stack(raw)
    assert len(error.value.messages) == 1 and message in error.value.messages[0], error.value.messages


def test_make_diff_writes_the_wave_into_diff_json(tmp_path) -> None:
    import yaml

    from offline.diff import main

    for name, config in (("before", prod()), ("after", bumped())):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    args = ["--before", str(tmp_path / "before/Pulumi.prod.yaml"), "--after", str(tmp_path / "after/Pulumi.prod.yaml")]
    assert main([*args, "--out", str(tmp_path)]) == 0
    wave = json.loads((tmp_path / "diff.json").read_text())["wave"]
    assert wave["batches"] == [["dc1"], ["dc2"], ["dc3"]]
    assert wave["domains"]["dc3"] == {
        "changes": ["rke2"],
        "waitsFor": ["dc2"],
        "steps": ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate", "rollout"],
    }
