"""Day-2 waves from the resource graph: one domain after another where there is something to roll, in the
stated order, resumable, and never on a first install."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from components.stack_check import validate_stack
from offline.critical_path import critical_path_length
from offline.diff import DiffError, compare_configs, observing, settled_nodes
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
    assert [name for name, _ in comparison.wave.domains["dc2"].steps] == [
        "rke2-login",
        "wave-drain",
        "rke2-upgrade",
        "wave-gate",
        "rollout",
    ]


def test_rollout_order_and_max_unavailable_set_the_batches() -> None:
    comparison = compare_configs("prod", prod(), bumped(order=["dc3"], maxUnavailable=2))
    assert comparison.wave is not None
    assert comparison.wave.batches == [["dc3", "dc1"], ["dc2"]]
    assert comparison.wave.domains["dc2"].waits_for == ["dc1", "dc3"]
    assert comparison.wave.domains["dc1"].waits_for == []


def test_the_wave_graph_puts_every_disruptive_step_of_a_domain_after_the_previous_domains_last_step() -> None:
    with observing(settled_nodes(prod())):
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


def resumed(nodes: dict[str, Any], domain: str, **status: str) -> dict[str, Any]:
    """`nodes` with `domain`'s Node as a failed turn leaves it: cordoned by the wave, the turn's start recorded."""
    nodes = copy.deepcopy(nodes)
    item = next(i for i in nodes["items"] if i["metadata"]["labels"]["topology.kubernetes.io/zone"] == domain)
    item["spec"]["unschedulable"] = True
    item["metadata"]["annotations"] |= {
        "gpu-pool.dev/wave-cordoned": domain,
        "gpu-pool.dev/wave-turn": "2026-12-04T18:00:00Z",
    }
    item["status"]["nodeInfo"] |= status
    return nodes


def test_a_wave_that_stopped_at_a_domain_resumes_there_and_leaves_the_done_ones_alone() -> None:
    """dc1 rolled and recorded; dc2's gate failed after its agent came back on the new release (WRONG-1)."""
    after = bumped()
    nodes = settled_nodes(prod())
    done = settled_nodes(after)
    nodes["items"][0] = done["items"][0]
    comparison = compare_configs("prod", prod(), after, nodes=resumed(nodes, "dc2", kubeletVersion="v1.33.6+rke2r1"))
    assert comparison.wave is not None
    assert comparison.wave.batches == [["dc2"], ["dc3"]]
    dc2 = comparison.wave.domains["dc2"]
    assert dc2.turn == "resume"
    # Its gate runs again before the uncordon; no second install: the kubelet already runs the pin.
    assert [name for name, _ in dc2.steps] == ["wave-drain", "device-plugin-restart", "wave-gate", "rollout"]
    assert comparison.wave.domains["dc3"].waits_for == ["dc2"]
    assert "dc1" not in comparison.wave.domains


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


def test_a_worker_pin_newer_than_the_servers_is_refused_by_the_cluster_preflight() -> None:
    from components.gpu_failure_domain.plan import plan_wave

    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in bumped("v1.34.1+rke2r1").items()})
    problems = plan_wave(cfg, {}, "v1.33.5+rke2r1").problems
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


def write_stack(folder: Path, config: Config) -> Path:
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return path


def test_make_diff_writes_the_wave_and_the_nodes_it_assumed(tmp_path: Path) -> None:
    from offline.diff import main

    before, after = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", bumped())
    assert main(["--before", str(before), "--after", str(after), "--out", str(tmp_path)]) == 0
    wave = json.loads((tmp_path / "diff.json").read_text())["wave"]
    assert wave["batches"] == [["dc1"], ["dc2"], ["dc3"]]
    assert wave["domains"]["dc3"] == {
        "turn": "roll",
        "why": "serving; the Node records another rke2: drain, change, gate, uncordon and record",
        "changes": ["rke2"],
        "waitsFor": ["dc2"],
        "steps": ["rke2-login", "wave-drain", "rke2-upgrade", "wave-gate", "rollout"],
    }
    assert wave["capacity"] == [
        {"out": [], "slots": 9},
        {"out": ["dc1"], "slots": 5},
        {"out": ["dc2"], "slots": 5},
        {"out": ["dc3"], "slots": 8},
        {"out": [], "slots": 9},
    ]
    # The Nodes it planned against, as `kubectl get nodes -o json` lists them, to edit and pass back.
    nodes = json.loads((tmp_path / "nodes.json").read_text())
    assert nodes == settled_nodes(prod())


def test_make_diff_plans_against_saved_nodes_and_says_what_up_will_do_now(tmp_path: Path, capsys) -> None:
    from offline.diff import main

    before, after = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", bumped())
    saved = tmp_path / "nodes.json"
    saved.write_text(json.dumps(resumed(settled_nodes(prod()), "dc1")), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["--before", str(before), "--after", str(after), "--nodes", str(saved), "--out", str(out)]) == 0
    document = json.loads((out / "diff.json").read_text())
    assert document["nodes"] == str(saved) and not (out / "nodes.json").exists()
    assert document["wave"]["domains"]["dc1"]["turn"] == "resume"
    assert document["wave"]["capacity"][0] == {"out": ["dc1"], "slots": 5}
    printed = capsys.readouterr().out
    assert f"planned against the Nodes in {saved}" in printed
    assert "  1. dc1 (first, resume): RKE2 agent upgrade" in printed


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ('{"kind": "PodList", "items": [{"kind": "Pod"}]}', "lists 1 Pod, not only Nodes"),
        ('{"kind": "Node"}', "has no status.conditions"),
    ],
    ids=["not JSON", "not a node list", "a node without status"],
)
def test_make_diff_refuses_a_nodes_file_it_cannot_read_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    from offline.diff import main

    before = write_stack(tmp_path / "before", prod())
    saved = tmp_path / "nodes.json"
    saved.write_text(content, encoding="utf-8")
    assert main(["--before", str(before), "--after", str(before), "--nodes", str(saved)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: NODES: ") and message in error and "Traceback" not in error


def test_max_unavailable_at_the_pool_size_is_a_danger_that_fails_the_diff_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from offline.diff import main

    before = write_stack(tmp_path / "before", prod())
    after = write_stack(tmp_path / "after", bumped(maxUnavailable=3))
    args = ["--before", str(before), "--after", str(after), "--out", str(tmp_path)]
    assert main([*args, "--fail-on-danger"]) == 1
    document = json.loads((tmp_path / "diff.json").read_text())
    assert document["dangers"] == 2 and len(document["waveDangers"]) == 2
    printed = capsys.readouterr().out
    assert "! gpu-pool:rollout.maxUnavailable is 3 with 3 failure domains" in printed
    assert "! the pool has no schedulable GPU while dc1, dc2, dc3 are out in this wave" in printed
    assert "       0 slots, out: dc1, dc2, dc3" in printed


def test_make_diff_against_a_node_that_is_not_ready_counts_it_out_and_names_the_danger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FIELD-REVIEW-5 WRONG-3 through `make diff NODES=`: dc2's Ready condition Unknown printed "Dangers: none"."""
    from offline.diff import main

    after = prod()
    after["gpu-pool:sharingProfiles"]["a1000-x4"]["replicas"] = 2
    before_file, after_file = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", after)
    nodes = settled_nodes(prod())
    dc2 = next(i for i in nodes["items"] if i["metadata"]["labels"]["topology.kubernetes.io/zone"] == "dc2")
    dc2["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]
    saved = tmp_path / "nodes.json"
    saved.write_text(json.dumps(nodes), encoding="utf-8")

    assert (
        main(["--before", str(before_file), "--after", str(after_file), "--nodes", str(saved), "--out", str(tmp_path)])
        == 0
    )

    printed = capsys.readouterr().out
    assert "Dangers: none" not in printed
    assert "! dc2 is not Ready: its turn stops before the drain and the wave stops there" in printed
    document = json.loads((tmp_path / "diff.json").read_text())
    assert document["wave"]["batches"][0] == ["dc2"]
    assert document["wave"]["capacity"][0]["out"] == ["dc2"]


def test_make_diff_plans_registry_mirrors_added_to_existing_domains_as_a_wave_that_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cloud-init runs once: a mirror added later reaches the VMs that exist only through a turn of the wave."""
    from offline.diff import main

    after = prod()
    after["gpu-pool:registryMirrors"] = {"docker.io": ["http://mirror.lab.internal:5000"]}
    before, later = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", after)
    assert main(["--before", str(before), "--after", str(later), "--out", str(tmp_path)]) == 0
    wave = json.loads((tmp_path / "diff.json").read_text())["wave"]
    assert wave["batches"] == [["dc1"], ["dc2"], ["dc3"]]
    assert wave["domains"]["dc2"]["changes"] == ["files"]
    assert wave["domains"]["dc2"]["steps"] == ["rke2-login", "wave-drain", "rke2-files", "wave-gate", "rollout"]
    assert "proxy, registry and apt mirror files rewritten, rke2-agent restarted" in capsys.readouterr().out


def test_make_diff_plans_an_apt_mirror_added_to_existing_domains_as_a_files_wave_and_replaces_no_vm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cloud-init's apt sources are first-boot only: the mirror reaches the VMs that exist through the files turn,
    never by recreating them; the driver container gets the mirror in the same turn (its template names the
    ConfigMap: a driver-template change)."""
    from offline.diff import main

    after = prod()
    after["gpu-pool:aptMirror"] = {"uri": "http://apt.lab.internal/ubuntu"}
    before, later = write_stack(tmp_path / "before", prod()), write_stack(tmp_path / "after", after)
    assert main(["--before", str(before), "--after", str(later), "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "diff.json").read_text())
    assert document["wave"]["batches"] == [["dc1"], ["dc2"], ["dc3"]]
    assert {name: turn["changes"] for name, turn in document["wave"]["domains"].items()} == {
        name: ["driver-template", "files"] for name in ("dc1", "dc2", "dc3")
    }
    assert not [c for c in document["changes"] if "replace" in str(c.get("op", "")) or c.get("op") == "delete"]
    assert "proxy, registry and apt mirror files rewritten" in capsys.readouterr().out
