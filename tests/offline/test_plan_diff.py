"""`make diff`: the day-2 changes a user really makes, each with what the engine would do and no unexpected danger.

Every row previews the prod stack before and after the change (the real program, offline) and compares the
two plans with the rules the providers apply. A row lists every resource that changes with its operation;
anything not listed must stay the same, and the dangers must be exactly the expected ones.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline.diff import DiffError, diff_configs, main, settled_nodes
from offline.plan_diff import Change, diff_recordings
from offline.runner import read_stack_file
from tests.chart_archive import package_chart
from tests.ssh_keys import TEST_PUBLIC_KEY

FD = "gpu-pool:failureDomains"
KEY = TEST_PUBLIC_KEY
Config = dict[str, Any]


def prod() -> Config:
    return copy.deepcopy(read_stack_file("prod"))


@dataclass(frozen=True)
class NodeState:
    """What a failed or interrupted wave leaves on one domain's Node, beside what the earlier file's `up` left."""

    domain: str
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    kubelet: str | None = None

    def apply(self, nodes: dict[str, Any]) -> dict[str, Any]:
        """The same on a `kubectl get nodes -o json` answer (a copy)."""
        nodes = copy.deepcopy(nodes)
        for item in nodes["items"]:
            if (item["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone") != self.domain:
                continue
            item["metadata"].setdefault("annotations", {}).update(self.annotations)
            if self.unschedulable:
                item["spec"]["unschedulable"] = True
            if self.kubelet:
                item["status"]["nodeInfo"]["kubeletVersion"] = self.kubelet
        return nodes


# dc1 as a wave's drain leaves it: cordoned, marked as the wave's, the turn's start recorded.
MID_TURN = {"gpu-pool.dev/wave-cordoned": "dc1", "gpu-pool.dev/wave-turn": "2026-12-04T18:00:00Z"}


@dataclass
class Row:
    name: str
    change: Callable[[Config], None]
    ops: dict[str, str]
    replace_keys: dict[str, list[str]] = field(default_factory=dict)
    dangers: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    before: Callable[[Config], None] = lambda config: None
    # The cluster's Nodes differ from what the earlier file's `up` leaves (`make diff NODES=`).
    nodes: NodeState | None = None


def secret(config: Config, key: str, ciphertext: str) -> None:
    config[f"gpu-pool:{key}"] = {"secure": ciphertext}


def all_domains(config: Config, settings: dict[str, Any]) -> None:
    for domain in config[FD]:
        domain.update(settings)


def add_domain(config: Config) -> None:
    dc4 = copy.deepcopy(config[FD][2])
    dc4.update({"name": "dc4", "proxmoxNode": "pve-dc4", "vmId": 4401, "hostname": "rke2-worker-dc4-gpu-a"})
    dc4["network"] = {**dc4["network"], "ipv4": "10.10.24.51/24", "gateway": "10.10.24.1"}
    config[FD].append(dc4)


def keys_everywhere(config: Config) -> None:
    all_domains(config, {"sshAuthorizedKeys": [KEY]})


def wave(*domains: int, **extra: str) -> dict[str, str]:
    """A domain's turn in a day-2 wave: drain, its gate and its last step (uncordon, record), plus its changes."""
    ops: dict[str, str] = {}
    for i in domains:
        ops |= {f"dc{i}-wave-drain": "create", f"dc{i}-wave-gate": "create", f"dc{i}-rollout": "update"}
        ops |= {f"dc{i}-{step}": op for step, op in extra.items()}
    return ops


def namespace(config: Config, name: str) -> None:
    config.setdefault("gpu-pool:gpuOperator", {})["namespace"] = name


DC4 = [
    "dc4",
    "dc4-node-cleanup",
    "dc4-retire",
    "dc4-rollout",
    "dc4-pci-mapping",
    "dc4-cloud-init",
    "dc4-vm",
    "dc4-power-cycle",
    "dc4-node-ready",
    "dc4-node-labels",
    "dc4-node-taint",
    "dc4-gpu-ready",
    "dc4-cuda-smoke-test",
]

ROWS = [
    Row(
        "an RKE2 patch bump upgrades each existing worker in place, one domain at a time",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.33.6+rke2r1"}),
        before=keys_everywhere,
        ops=wave(1, 2, 3, **{"rke2-login": "create", "rke2-upgrade": "create"}),
        info=["dc1-cloud-init: the cloud-init user data changed, but cloud-init is first-boot only"],
    ),
    Row(
        "an RKE2 minor bump upgrades each existing worker in place, one domain at a time",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.34.1+rke2r1"}),
        before=keys_everywhere,
        ops=wave(1, 2, 3, **{"rke2-login": "create", "rke2-upgrade": "create"}),
    ),
    Row(
        "a sharing profile edited in place replaces its ConfigMap and restarts the plugin on its nodes, in turn",
        lambda c: c["gpu-pool:sharingProfiles"]["a1000-x4"].update({"replicas": 2}),
        ops={
            "gpu-platform-time-slicing-config": "replace",
            "gpu-platform-alert-rules": "update",
            **wave(1, 2, **{"device-plugin-restart": "create", "gpu-ready": "update"}),
        },
        replace_keys={"gpu-platform-time-slicing-config": ["data.a1000-x4"]},
        info=["is gone for a moment", "dc1-gpu-ready waits until rke2-worker-dc1-gpu-a advertises 2 GPUs"],
    ),
    Row(
        "a wave stopped after dc1's drain resumes dc1 first, its agent already restarted: no second install",
        lambda c: c["gpu-pool:rke2"].update({"version": "v1.33.6+rke2r1"}),
        before=keys_everywhere,
        nodes=NodeState("dc1", MID_TURN, unschedulable=True, kubelet="v1.33.6+rke2r1"),
        ops={
            **wave(1, **{"device-plugin-restart": "create"}),
            **wave(2, 3, **{"rke2-login": "create", "rke2-upgrade": "create"}),
        },
    ),
    Row(
        "a change reverted while dc1 is the wave's finishes dc1's turn: restart, gate, uncordon, record",
        lambda c: None,
        nodes=NodeState("dc1", MID_TURN, unschedulable=True),
        ops=wave(1, **{"device-plugin-restart": "create"}),
    ),
    Row(
        "a join-token rotation rewrites no snippet and replaces no VM (A1)",
        lambda c: secret(c, "rke2Token", "v1:NEWCIPHERTEXT"),
        before=lambda c: secret(c, "rke2Token", "v1:OLDCIPHERTEXT"),
        ops={},
        info=["dc2-cloud-init: the cloud-init user data changed"],
    ),
    Row(
        "a sharing profile change on one domain relabels that node and waits for its new slot count",
        lambda c: c[FD][2].update({"sharing": "a1000-x4"}),
        ops={
            "dc3-node-labels": "update",
            "gpu-platform-alert-rules": "update",
            # dc3 was the one whole domain: no multi-GPU steering target left, and the refusal says so.
            "gpu-platform-gpu-steering-policy": "update",
            "gpu-platform-gpu-multi-gpu-policy": "update",
            **wave(3, **{"device-plugin-restart": "create", "gpu-ready": "update"}),
        },
        info=["dc3-gpu-ready waits until rke2-worker-dc3-gpu-a advertises 4 GPUs"],
    ),
    Row(
        "a driver bump within a branch upgrades the release and re-gates every smoke test (A2)",
        # On the deprecated 26.3 line, which lists two R580 drivers (26.7 lists one per branch).
        lambda c: c["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "580.173.02"}),
        before=lambda c: c["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "580.126.20"}),
        ops={
            "gpu-platform-gpu-operator": "update",
            **wave(1, 2, 3, **{"gpu-ready": "update", "cuda-smoke-test": "replace"}),
        },
        replace_keys={"dc1-cuda-smoke-test": ["metadata.name"]},
        info=["upgrades the driver one node at a time", "the CUDA smoke test re-runs on rke2-worker-dc2-gpu-a"],
    ),
    Row(
        "the upgrade from the deprecated 26.3 line to 26.7 upgrades the release and rolls the new driver in a wave",
        lambda c: c["gpu-pool:gpuOperator"].update({"chartVersion": "v26.7.0", "driverVersion": "595.91.07"}),
        before=lambda c: c["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "580.173.02"}),
        ops={
            "gpu-platform-gpu-operator": "update",
            "gpu-platform-gpu-operator-ready": "replace",
            **wave(1, 2, 3, **{"gpu-ready": "update", "cuda-smoke-test": "replace"}),
        },
    ),
    Row(
        "setting a kernel pin runs the drained kernel upgrade on that domain only (A8, A10)",
        lambda c: c[FD][1].update({"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [KEY]}),
        before=lambda c: c[FD][1].update({"sshAuthorizedKeys": [KEY]}),
        ops={
            "dc2-kernel-login": "create",
            "dc2-kernel-install": "create",
            "dc2-kernel-driver-rebuild": "create",
            **wave(2, **{"gpu-ready": "update", "cuda-smoke-test": "replace"}),
        },
        info=["dc2-kernel-install: part of the kernel upgrade"],
    ),
    Row(
        "a kernel pin on every domain upgrades them one after another, never the whole pool at once",
        lambda c: all_domains(c, {"kernel": "6.8.0-60-generic"}),
        before=keys_everywhere,
        ops=wave(
            1,
            2,
            3,
            **{
                step: "create"
                for step in (
                    "kernel-login",
                    "kernel-install",
                    "kernel-driver-rebuild",
                )
            },
            **{"gpu-ready": "update", "cuda-smoke-test": "replace"},
        ),
    ),
    Row(
        "a card moved to another slot updates its mapping and power-cycles that VM, drained",
        lambda c: c[FD][0]["gpu"].update({"pciAddress": "0000:02:00"}),
        ops={
            "dc1-pci-mapping": "update",
            **wave(1, **{"power-cycle": "update", "gpu-ready": "update", "cuda-smoke-test": "replace"}),
        },
        info=["dc1-power-cycle runs: it drains rke2-worker-dc1-gpu-a"],
    ),
    Row(
        "more cores wait in Proxmox for the drained power cycle, never an undrained provider reboot (A9)",
        lambda c: c[FD][0].update({"cores": 12}),
        ops={"dc1-vm": "update", **wave(1, **{"power-cycle": "update"})},
        info=["dc1-power-cycle runs"],
    ),
    Row(
        "more cores on every domain power-cycle the domains one after another, never all at once",
        lambda c: all_domains(c, {"cores": 12}),
        ops={**{f"dc{i}-vm": "update" for i in (1, 2, 3)}, **wave(1, 2, 3, **{"power-cycle": "update"})},
    ),
    Row(
        "a disk moved to another datastore is refused by the provider on a running VM, which is flagged",
        lambda c: c["gpu-pool:proxmox"].update({"diskDatastore": "fast-nvme"}),
        ops={f"dc{i}-vm": "update" for i in (1, 2, 3)},
        dangers=["refuses to move disks between datastores while the VM runs", "cloud-init settings change"] * 3,
    ),
    Row(
        "the operator moved to another namespace is flagged: the new release collides with the old one",
        lambda c: namespace(c, "nvidia-gpu-operator"),
        ops={
            "gpu-platform-namespace": "replace",
            "gpu-platform-gpu-operator": "replace",
            "gpu-platform-gpu-operator-ready": "update",
            "gpu-platform-dcgm-metrics": "replace",
            "gpu-platform-time-slicing-config": "replace",
            "gpu-platform-gpu-steering-policy": "update",
            "gpu-platform-gpu-multi-gpu-policy": "update",  # it excludes the operator's namespace too
            "gpu-platform-alert-rules": "update",
            **{f"dc{i}-gpu-ready": "update" for i in (1, 2, 3)},
        },
        replace_keys={"gpu-platform-gpu-operator": ["namespace"]},
        dangers=["moves to another namespace: the provider installs the new release before it deletes the old one"],
    ),
    Row(
        "a new domain creates its whole chain and touches no other domain",
        add_domain,
        # dc4 is whole like dc3: the multi-GPU refusal names it among the whole domains.
        ops={
            **{name: "create" for name in DC4},
            "gpu-platform-alert-rules": "update",
            "gpu-platform-gpu-multi-gpu-policy": "update",
        },
    ),
    Row(
        "a removed domain would delete its protected VM, which pulumi up refuses",
        lambda c: c[FD].pop(),
        ops={
            **{name.replace("dc4", "dc3"): "delete" for name in DC4},
            "gpu-platform-alert-rules": "update",
            # dc3 was the one whole domain (see the sharing change above).
            "gpu-platform-gpu-steering-policy": "update",
            "gpu-platform-gpu-multi-gpu-policy": "update",
        },
        dangers=["dc3-vm is protected: the preview that `pulumi up` runs first fails on its delete"],
        info=[
            "dc3-node-cleanup deletes the Node object of the removed domain after its VM is gone",
            "dc3-retire drains rke2-worker-dc3-gpu-a before its VM stops",
        ],
    ),
    Row(
        "a new VM id replaces the protected VM: the provider forces it in CustomizeDiff, not in its schema",
        lambda c: c[FD][0].update({"vmId": 4102}),
        # The new VM's id is unknown until it exists, so node-ready's triggers change too (the engine showed it).
        ops={"dc1-vm": "replace", "dc1-power-cycle": "update", "dc1-node-ready": "replace"},
        replace_keys={"dc1-vm": ["vmId"], "dc1-node-ready": ["triggers"]},
        dangers=["dc1-vm is protected and would be replaced (vmId)"],
    ),
    Row(
        "a domain moved to another Proxmox node replaces its protected VM, since the program never migrates",
        lambda c: c[FD][0].update({"proxmoxNode": "pve-dc9"}),
        ops={
            "dc1-pci-mapping": "update",
            "dc1-cloud-init": "replace",
            "dc1-vm": "replace",
            "dc1-node-ready": "replace",
            **wave(1, **{"power-cycle": "update", "gpu-ready": "update", "cuda-smoke-test": "replace"}),
        },
        replace_keys={"dc1-vm": ["nodeName"], "dc1-cloud-init": ["nodeName"], "dc1-node-ready": ["triggers"]},
        dangers=["dc1-vm is protected and would be replaced (nodeName)", "the new VM needs VM id 4101"],
    ),
    Row(
        "a new hostname is a new GPU worker, whose replacement VM would name a snippet that is never written",
        lambda c: c[FD][0].update({"hostname": "rke2-worker-dc1-gpu-b"}),
        ops={
            "dc1-vm": "replace",
            "dc1-node-cleanup": "update",
            "dc1-retire": "update",
            "dc1-rollout": "update",
            "dc1-power-cycle": "update",
            "dc1-node-ready": "replace",
            "dc1-node-labels": "replace",
            "dc1-node-taint": "replace",
            "dc1-gpu-ready": "update",
            "dc1-cuda-smoke-test": "replace",
            "gpu-platform-alert-rules": "update",
        },
        replace_keys={"dc1-vm": ["initialization.userDataFileId"]},
        dangers=[
            "dc1-vm is protected and would be replaced (initialization.userDataFileId)",
            "rke2-worker-dc1-gpu-b-user-data.yaml, which is never written",
            "the new VM needs VM id 4101",
        ],
    ),
    Row(
        # The generating policy learns to skip it: an explicit entry wins over a label rule (issue 37 item 5).
        "a new quota namespace adds one ResourceQuota and the label rule skips it",
        lambda c: c["gpu-pool:gpuQuotas"]["namespaces"].update({"team-vision": 1}),
        ops={"gpu-platform-quota-team-vision": "create", "gpu-platform-gpu-quota-policy-kubeflow-profiles": "update"},
    ),
    Row(
        "a new quota selector adds its own GeneratingPolicy, the others untouched (A6)",
        lambda c: c["gpu-pool:gpuQuotas"]["selectors"].append(
            {"name": "research", "matchLabels": {"example.org/team": "research"}, "maxGpus": 1}
        ),
        ops={"gpu-platform-gpu-quota-policy-research": "create"},
    ),
]


def changed(changes: list[Change]) -> dict[str, Change]:
    return {c.name: c for c in changes if c.op != "same"}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_a_day_2_change_does_what_the_engine_would_and_nothing_more(row: Row) -> None:
    before, after = prod(), prod()
    row.before(before)
    row.before(after)
    row.change(after)
    nodes = row.nodes.apply(settled_nodes(before)) if row.nodes else None
    changes = diff_configs("prod", before, after, nodes)
    assert {name: c.op for name, c in changed(changes).items()} == row.ops
    for name, keys in row.replace_keys.items():
        assert changed(changes)[name].replace_keys == keys
    dangers = [d for c in changes for d in c.dangers]
    assert len(dangers) == len(row.dangers), dangers
    for expected, found in zip(row.dangers, dangers, strict=True):
        assert expected in found
    info = [i for c in changes for i in c.info]
    for expected in row.info:
        assert any(expected in text for text in info), (expected, info)


# --- the defects of part A, as the engine would have run them --------------------------------------------


def test_the_old_snippet_options_would_have_been_a_create_before_delete_of_the_same_file(monkeypatch) -> None:
    before, after = prod(), prod()
    secret(before, "rke2Token", "v1:OLD")
    secret(after, "rke2Token", "v1:NEW")
    from offline.diff import preview

    old, new = preview("prod", before, "earlier"), preview("prod", after, "current")
    for recording in (old, new):  # what the program registered before the fix
        snippet = recording.named("dc1-cloud-init")
        snippet.ignore_changes, snippet.delete_before_replace = [], False
    change = next(c for c in diff_recordings(old, new) if c.name == "dc1-cloud-init")
    assert (change.op, change.replace_keys, change.delete_before_replace) == ("replace", ["sourceRaw.data"], False)
    assert "the old snippet's delete removes the new file" in change.dangers[0]


def test_the_providers_own_reboot_would_have_restarted_a_gpu_worker_undrained() -> None:
    from offline.diff import preview

    before, after = prod(), prod()
    after[FD][0]["cores"] = 12
    old, new = preview("prod", before, "earlier"), preview("prod", after, "current")
    for recording in (old, new):
        recording.named("dc1-vm").inputs.pop("rebootAfterUpdate")
    change = next(c for c in diff_recordings(old, new) if c.name == "dc1-vm")
    assert "reboots dc1-vm through the Proxmox API to apply cpu, without draining its node" in change.dangers[0]


def test_a_replaced_taint_step_that_did_not_delete_first_would_have_untainted_the_node() -> None:
    from offline.diff import preview

    before, after = prod(), prod()
    after["gpu-pool:kyverno"] = {"taintValue": "present"}
    old, new = preview("prod", before, "earlier"), preview("prod", after, "current")
    new.named("dc1-node-taint").delete_before_replace = False
    change = next(c for c in diff_recordings(old, new) if c.name == "dc1-node-taint")
    assert change.op == "replace" and "nvidia.com/gpu-" in change.dangers[0]


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        (lambda c: c["gpu-pool:rke2"].update({"version": "v1.31.5+rke2r1"}), r"v1\.31\.6\+rke2r1"),  # A3
        (lambda c: c["gpu-pool:gpuOperator"].update({"toolkit": {"setAsDefault": True}}), "was removed"),  # A5
        (lambda c: c[FD][1].update({"kernel": "6.8.0-60-generic"}), "no sshAuthorizedKeys"),  # A10
    ],
    ids=["an RKE2 pin without containerd 2.0", "a toolkit key that never worked on RKE2", "a kernel pin without a key"],
)
def test_a_change_the_program_refuses_is_reported_before_anything_is_compared(mistake, message) -> None:
    after = prod()
    mistake(after)
    with pytest.raises(DiffError, match=message):
        diff_configs("prod", prod(), after)


def test_an_earlier_file_that_todays_rules_refuse_is_still_compared_and_its_refusals_listed(tmp_path, capsys) -> None:
    """The file a user moves away from (an RKE2 pin without containerd 2.0, a removed toolkit key, a plain-text
    token) describes what is deployed: `make diff` compares it and says what the current file must not repeat."""
    before, after = prod(), prod()
    keys_everywhere(before)
    keys_everywhere(after)
    before["gpu-pool:rke2"]["version"] = "v1.32.1+rke2r1"
    before["gpu-pool:gpuOperator"]["toolkit"] = {"setAsDefault": True}
    before["gpu-pool:rke2Token"] = "K10" + "0" * 64 + "::server:secret"
    before_file = write_stack(tmp_path / "before", before)
    after_file = write_stack(tmp_path / "after", after)
    args = ["--stack", "prod", "--before", str(before_file), "--after", str(after_file), "--out", str(tmp_path)]

    assert main(args) == 0
    refusals = json.loads((tmp_path / "diff.json").read_text())["earlierRefusals"]
    assert [r.split(":", 2)[1] for r in refusals] == ["rke2.version", "gpuOperator.toolkit.setAsDefault", "rke2Token"]
    assert "K10" + "0" * 64 not in "".join(refusals)
    out = capsys.readouterr().out
    assert "The earlier file breaks rules added since" in out and "v1.32.2+rke2r1" in out


# --- the command: files in, table and diff.json out ----------------------------------------------------------


def write_stack(folder: Path, config: Config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return path


def test_make_diff_writes_the_json_contract_and_a_table_and_exits_1_on_danger_when_asked(tmp_path, capsys) -> None:
    after = prod()
    after[FD].pop()
    before_file = write_stack(tmp_path / "before", prod())
    after_file = write_stack(tmp_path / "after", after)
    args = ["--stack", "prod", "--before", str(before_file), "--after", str(after_file), "--out", str(tmp_path)]
    assert main(args) == 0
    document = json.loads((tmp_path / "diff.json").read_text())
    assert set(document) == {
        "stack",
        "before",
        "nodes",
        "changes",
        "dangers",
        "waveDangers",
        "nodesDangers",
        "earlierRefusals",
        "wave",
    }
    assert document["wave"] is None  # a removed domain has nothing to roll
    assert document["earlierRefusals"] == []
    assert document["stack"] == "prod" and document["dangers"] == 1
    vm = next(c for c in document["changes"] if c["name"] == "dc3-vm")
    assert set(vm) == {"urn", "type", "name", "op", "keys", "replaceKeys", "deleteBeforeReplace", "dangers", "info"}
    assert vm["op"] == "delete" and vm["urn"].endswith("::dc3-vm")
    assert all(c["op"] != "same" or c["info"] for c in document["changes"])
    out = capsys.readouterr().out
    assert "-  proxmoxve:index/vmLegacy:VmLegacy" in out and "unchanged" in out and "Dangers (1):" in out
    assert main([*args, "--fail-on-danger"]) == 1


def test_a_stack_file_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    assert main(["--stack", "prod", "--before", str(tmp_path / "Pulumi.old.yaml"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: no stack file Pulumi.old.yaml")


# --- the operator upgrade with the chart on disk: CRDs first, then the release ---------------------------


def test_the_26_3_to_26_7_upgrade_from_disk_updates_the_crds_before_the_release_and_says_what_restarts(
    upstream: Path, tmp_path: Path
) -> None:
    old = package_chart(upstream / "gpu-operator" / "v26.3.2" / "chart", "v26.3.2", tmp_path)
    new = package_chart(upstream / "gpu-operator" / "v26.7.0" / "chart", "v26.7.0", tmp_path)
    before, after = prod(), prod()
    before["gpu-pool:gpuOperator"].update({"chartVersion": "v26.3.2", "driverVersion": "580.173.02", "chart": str(old)})
    after["gpu-pool:gpuOperator"].update({"chartVersion": "v26.7.0", "driverVersion": "580.173.02", "chart": str(new)})
    changes = changed(diff_configs("prod", before, after))
    crds = {
        n: c.op for n, c in changes.items() if c.type == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    }
    assert crds == {
        "gpu-platform-crd-clusterpolicies.nvidia.com": "update",
        "gpu-platform-crd-nvidiadrivers.nvidia.com": "update",
        "gpu-platform-crd-gpuclusters.nvidia.com": "create",
        "gpu-platform-crd-computedomains.resource.nvidia.com": "create",
        "gpu-platform-crd-computedomaincliques.resource.nvidia.com": "create",
    }  # NFD's CRDs are the same in its charts 0.18.3 and 0.19.0: no change shown
    release = changes["gpu-platform-gpu-operator"]
    assert release.op == "update" and {"chart", "version"} <= set(release.keys)
    assert any(
        "chart v26.3.2 -> v26.7.0" in i
        and 'maxUnavailable "0"' in i
        and "replaces a driver pod only on a cordoned node" in i
        and "each domain's turn (driver-template" in i
        for i in release.info
    )
    assert not any("in place without evicting" in i for c in changes.values() for i in c.info)
    # The chart bump with the driver kept is a wave, one domain at a time (FIELD-REVIEW-6 WRONG-1).
    assert {n: c.op for n, c in changes.items() if n.endswith("-wave-drain")} == {
        f"dc{n}-wave-drain": "create" for n in (1, 2, 3)
    }
    assert not [d for c in changes.values() for d in c.dangers]
