"""The time-slicing ConfigMap: one profile per key, judged by NVIDIA's own node software, not by a reading of it here.

What the device plugin makes of each document is its own config loader's output (tests/fixtures/deviceplugin/
profile-config.json, made and re-checked by the e2e tier's tests/e2e/test_device_plugin_config.py) and what GPU
Feature Discovery and the device plugin did with it on a real H200 (tests/fixtures/deviceplugin/h200/, the commands
in docs/verification.md). CI has no GPU: these tests replay the recordings.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from components.gpu_platform.time_slicing import (
    TIME_SLICING_CONFIGMAP,
    build_time_slicing_config,
    build_time_slicing_configmap,
)
from config.sharing import SharingProfile
from knowledge.gpu_operator import GPU_RESOURCE
from tests.plugin_recording import (
    CDI,
    ENVVAR,
    FIXTURES,
    H200,
    WRONG_SHAPES,
    card,
    cdi_spec,
    exits,
    gfd_labels,
    h200_documents,
    kubelet_report,
    loader_documents,
    max_replicas,
    pinned_plugin,
    program_documents,
    reading_differences,
    recorded_config,
    recorded_documents,
    recorded_run_names,
    shape,
    shipped_stacks,
    stack_config,
)

# The article's plan: dc1 and dc2 time-sliced x4, dc3 whole.
ARTICLE_PROFILES = {"a1000-x4": SharingProfile(replicas=4), "whole": SharingProfile(replicas=1)}
PROGRAM_SHAPES = list(program_documents())
SHIPPED_STACKS = shipped_stacks()
H200_V020 = FIXTURES / "h200-v0.20.0"


def replicas_of(name: str) -> int:
    return int(name.removeprefix("replicas-"))


def parsed(profile: SharingProfile) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(build_time_slicing_config({"p": profile})["p"])
    return document


def test_a_shared_profile_has_exactly_the_design_document_shape() -> None:
    assert parsed(SharingProfile(replicas=4)) == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": False,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
            }
        },
    }


def test_a_whole_card_profile_has_no_sharing_block() -> None:
    assert parsed(SharingProfile(replicas=1)) == {"version": "v1", "flags": {"migStrategy": "none"}}


# --- the device plugin's own config loader (recorded; the e2e tier runs it again) -----------------------------------


def test_the_plugins_recorded_reading_is_of_exactly_the_documents_the_program_renders_today() -> None:
    recorded = {name: entry["document"] for name, entry in recorded_config()["profiles"].items()}

    assert recorded == loader_documents(), (
        "a rendered profile changed since the plugin's loader read it: `make e2e-tools`, then "
        "`python -m tests.plugin_recording record-config .tools/e2e/bin/profile-config` (docs/verification.md)"
    )


def test_the_recorded_reading_is_the_pinned_plugins() -> None:
    assert recorded_config()["plugin"] == pinned_plugin()


def test_the_recorded_replica_counts_are_exactly_those_a_profile_accepts() -> None:
    for refused in (0, max_replicas() + 1):
        with pytest.raises(ValidationError):
            SharingProfile(replicas=refused)
    assert (PROGRAM_SHAPES[0], PROGRAM_SHAPES[-1], len(PROGRAM_SHAPES)) == ("replicas-1", "replicas-64", 64)


@pytest.mark.parametrize("name", PROGRAM_SHAPES)
def test_the_device_plugin_reads_each_profile_as_the_program_means_it(name: str) -> None:
    reading = recorded_config()["profiles"][name]["reading"]

    assert reading_differences(reading, replicas_of(name)) == []


WRONG_SHAPE_READ_AS = {
    # The flags sit where the plugin's command-line flags live: it drops them without a word.
    "rename-under-flags": "the plugin silently ignores part of the document",
    # The whole time-slicing block there: the card is not shared at all.
    "sharing-under-flags": 'sharingStrategy: the plugin reads "none", the program means "time-slicing"',
    # Shared cards renamed nvidia.com/gpu.shared: no workload and no steering policy asks for that name.
    "renamed": "renameByDefault: the plugin reads true, the program means false",
}


@pytest.mark.parametrize("change", WRONG_SHAPES)
def test_a_profile_shape_the_plugin_reads_differently_fails_the_check_with_the_reason(change: str) -> None:
    reading = recorded_config()["profiles"][f"wrong-{change}"]["reading"]

    differences = reading_differences(reading, 4)

    assert any(d.startswith(WRONG_SHAPE_READ_AS[change]) for d in differences), differences


def test_every_wrong_shape_has_its_expected_reason() -> None:
    assert set(WRONG_SHAPE_READ_AS) == set(WRONG_SHAPES)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_each_shipped_stacks_configmap_holds_only_recorded_documents(stack: str) -> None:
    cfg = stack_config(stack)
    data = build_time_slicing_config(cfg.sharing_profiles)

    assert data == {name: program_documents()[shape(profile)] for name, profile in cfg.sharing_profiles.items()}


# --- on a real H200: the device plugin registered with a kubelet, GFD one-shot ---------------------------------------


def test_the_h200_ran_on_exactly_the_documents_the_program_renders_today() -> None:
    assert h200_documents() == recorded_documents(), (
        "a rendered profile changed since the H200 run: run it again (docs/verification.md)"
    )


def test_every_recorded_document_ran_on_the_h200_and_every_program_exited_cleanly() -> None:
    assert recorded_run_names() == sorted(recorded_documents())
    assert not (H200 / "skipped.txt").exists()
    assert {kind: {run for run, code in runs.items() if code != 0} for kind, runs in exits().items()} == {
        "gfd": set(),
        "kubelet": set(),
        "plugin": set(),
    }


def test_the_h200_run_was_of_the_pinned_plugin_on_the_expected_card_and_driver() -> None:
    machine = (H200 / "machine.txt").read_text()
    version = pinned_plugin().split()[-1]

    assert f"NVIDIA Device Plugin version {version}" in machine
    assert f"GPU Feature Discovery version {version}" in machine
    assert (card()["name"], card()["driver_version"]) == ("NVIDIA H200", "580.159.04")


@pytest.mark.parametrize("name", PROGRAM_SHAPES)
def test_on_the_h200_the_plugin_advertises_one_nvidia_com_gpu_per_replica_of_the_card(name: str) -> None:
    report = kubelet_report(name)
    ids = [device["ID"] for device in report["devices"]]

    assert report["register"]["resourceName"] == GPU_RESOURCE
    assert report["deviceCount"] == len(set(ids)) == replicas_of(name)
    assert {i.split("::")[0] for i in ids} == {card()["uuid"]}
    assert {device["health"] for device in report["devices"]} == {"Healthy"}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_slots_each_domains_gate_waits_for_are_what_the_plugin_advertised_per_card_times_its_cards(
    stack: str,
) -> None:
    """The gate (node_steps GPU_SLOTS, the wave's gate, doctor) waits for cfg.slots(domain). A VM with several cards
    cannot be recorded on one H200: the plugin replicates each physical device on its own (k8s-device-plugin v0.19.3
    internal/rm/device_map.go updateDeviceMapWithReplicas, `for _, id := range ids`), so a domain's count is the
    recorded per-card count times its cards."""
    cfg = stack_config(stack)

    for domain in cfg.failure_domains:
        per_card = kubelet_report(shape(cfg.sharing_profiles[domain.sharing]))["deviceCount"]
        assert cfg.slots(domain) == per_card * len(domain.cards), domain.name


def test_an_allocate_of_one_slot_returns_the_cards_cdi_device_as_the_operator_runs_the_plugin() -> None:
    one, two = kubelet_report("replicas-4", CDI)["allocate"]
    name = f"k8s.device-plugin.nvidia.com/gpu={card()['uuid']}"

    assert one["error"] is None
    assert one["response"]["cdiDevices"] == [{"name": name}]
    assert list(one["response"]["annotations"].values()) == [name]
    assert all(key.startswith("cdi.k8s.io/") for key in one["response"]["annotations"])
    # Two slots of the one card (failRequestsGreaterThanOne false): the same card, once.
    assert two["error"] is None
    assert two["response"]["cdiDevices"] == [{"name": name}]


def test_the_cdi_name_resolves_to_the_cards_device_node_and_the_drivers_shared_nodes() -> None:
    spec = cdi_spec()
    device = next(d for d in spec["devices"] if d["name"] == card()["uuid"])

    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    assert [node["path"] for node in device["containerEdits"]["deviceNodes"]] == ["/dev/nvidia0"]
    assert {node["path"] for node in spec["containerEdits"]["deviceNodes"]} == {
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    }


def test_without_cdi_an_allocate_of_one_slot_returns_the_cards_device_nodes() -> None:
    one = kubelet_report("replicas-4", ENVVAR)["allocate"][0]

    assert one["response"]["envs"] == {"NVIDIA_VISIBLE_DEVICES": card()["uuid"]}
    assert {d["hostPath"] for d in one["response"]["devices"]} == {
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    }


def test_on_the_h200_the_wrong_shapes_break_what_the_gate_waits_for() -> None:
    # The time-slicing block under flags: one slot where the program's gate waits for four.
    assert kubelet_report("wrong-sharing-under-flags")["deviceCount"] == 1
    # Renamed: four slots, but of a resource the gate, the quota and every workload never ask for.
    renamed = kubelet_report("wrong-renamed")
    assert (renamed["register"]["resourceName"], renamed["deviceCount"]) == ("nvidia.com/gpu.shared", 4)
    # The flags under `flags`: the same slots, silently (the loader's strict read is what catches it).
    assert kubelet_report("wrong-rename-under-flags")["deviceCount"] == 4


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A kubelet report without what differs by run: the order of the devices and the CDI annotations' uuids."""
    return {
        "resource": report["register"]["resourceName"],
        "devices": sorted(d["ID"] for d in report["devices"]),
        "allocate": [
            (a["error"], (a["response"] or {}).get("cdiDevices"), (a["response"] or {}).get("devices"))
            for a in report["allocate"]
        ],
    }


def test_the_charts_own_v0_20_0_built_from_its_tag_did_exactly_the_same_on_the_h200() -> None:
    """gpu-operator v26.7.0 ships the plugin and GFD v0.20.0, which the Go module proxy does not serve: built from
    the tag for the H200 run only, on the shipped stacks' shapes, the largest and the wrong ones."""
    runs = sorted(p.stem for p in (H200_V020 / "kubelet").glob("*.json"))

    assert len(runs) == 8
    assert "NVIDIA Device Plugin version v0.20.0" in (H200_V020 / "machine.txt").read_text()
    for run in runs:
        mode, name = run.split("-", 1)
        assert comparable(kubelet_report(name, mode, H200_V020)) == comparable(kubelet_report(name, mode)), run
    for name in recorded_run_names(H200_V020):
        assert gfd_labels(name, H200_V020) == gfd_labels(name), name


# --- the ConfigMap itself -------------------------------------------------------------------------------------------


def test_keys_come_out_sorted_whatever_the_config_order() -> None:
    forwards = build_time_slicing_config({"b": SharingProfile(replicas=2), "a": SharingProfile(replicas=3)})
    backwards = build_time_slicing_config({"a": SharingProfile(replicas=3), "b": SharingProfile(replicas=2)})

    assert list(forwards) == ["a", "b"]
    assert forwards == backwards


def test_rendering_twice_gives_byte_identical_documents() -> None:
    assert build_time_slicing_config(ARTICLE_PROFILES) == build_time_slicing_config(ARTICLE_PROFILES)


@pytest.mark.parametrize("name", ["", "-x4", "a1000 x4", "a" * 64, "x4/"])
def test_a_profile_name_that_cannot_be_a_node_label_value_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="node label value"):
        build_time_slicing_config({name: SharingProfile(replicas=2)})


def test_no_profiles_gives_an_empty_configmap_rather_than_an_error() -> None:
    assert build_time_slicing_config({}) == {}


def test_the_configmap_lives_in_the_operator_namespace_under_the_fixed_name() -> None:
    configmap = build_time_slicing_configmap(ARTICLE_PROFILES, "gpu-operator")

    assert configmap["metadata"] == {"name": TIME_SLICING_CONFIGMAP, "namespace": "gpu-operator"}
    assert configmap["data"] == build_time_slicing_config(ARTICLE_PROFILES)


def test_the_configmap_is_a_valid_kubernetes_object() -> None:
    configmap = build_time_slicing_configmap(ARTICLE_PROFILES, "gpu-operator")

    kubernetes_validate.validate(configmap, kubernetes_validate.latest_version(), strict=True)
