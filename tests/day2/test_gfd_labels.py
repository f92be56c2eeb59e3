"""doctor reads a profile as NVIDIA's node software does, and names GPU Feature Discovery's labels left from an
earlier version of a profile edited in place (FIELD-REVIEW-4 WRONG-5).

doctor runs on a laptop without Go, so day2/doctor/sharing.py reads a profile itself; these tests hold that reading to
the plugin's own loader (tests/fixtures/deviceplugin/profile-config.json: every profile the program renders, the wrong
shapes and hand-edited edge cases) and to what GFD and the device plugin did under each document on an H200
(tests/fixtures/deviceplugin/h200). The floors then run on nodes carrying the labels GFD really wrote there.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from day2.doctor.sharing import read_profile
from day2.doctor.walk import Diagnosis, diagnose
from day2.objects import Snapshot
from day2.pool import Domain, PoolFacts
from knowledge.gpu_operator import GPU_PRODUCT_LABEL, GPU_RESOURCE, SHARED_PRODUCT_SUFFIX
from tests.day2.cli_helpers import ROOT
from tests.day2.k8s_objects import dump
from tests.day2.scenarios import NODES, gpu_node, healthy_pool, replaced, time_slicing_configmap
from tests.plugin_recording import (
    gfd_labels,
    h200_documents,
    kubelet_report,
    recorded_config,
    recorded_run_names,
)

DC1 = NODES["dc1"]
PROD = PoolFacts(domains=(Domain("dc1", DC1, "a1000-x4", 4),), profile_slots={"a1000-x4": 4, "whole": 1}, stack="prod")
LOADER_READ = sorted(recorded_config()["profiles"])


@pytest.mark.parametrize("name", LOADER_READ)
def test_doctors_reading_of_a_profile_is_the_plugins_own_loaders(name: str) -> None:
    recorded = recorded_config()["profiles"][name]
    loader = recorded["reading"]
    mine = read_profile(recorded["document"])

    if loader["loadError"] is not None:
        assert mine is None
        return
    assert mine is not None
    entry = next((r for r in loader["resources"] if r["name"] == GPU_RESOURCE), None)
    replicas = entry["replicas"] if entry else 1
    strategy = loader["sharingStrategy"] if replicas > 1 else "none"
    assert (mine.replicas, mine.renamed, mine.gfd_labels()["nvidia.com/gpu.sharing-strategy"]) == (
        replicas,
        bool(entry and entry["rename"]),
        strategy,
    )


@pytest.mark.parametrize("name", recorded_run_names())
def test_the_sharing_labels_doctor_expects_are_the_ones_gfd_wrote_on_the_h200(name: str) -> None:
    reading = read_profile(h200_documents()[name])
    labels = gfd_labels(name)

    assert reading is not None
    assert reading.gfd_labels().items() <= labels.items()
    assert labels[GPU_PRODUCT_LABEL].endswith(SHARED_PRODUCT_SUFFIX) is reading.shared_product


@pytest.mark.parametrize("name", recorded_run_names())
def test_the_slots_doctor_expects_are_the_nvidia_com_gpu_the_plugin_advertised_on_the_h200(name: str) -> None:
    reading = read_profile(h200_documents()[name])
    report = kubelet_report(name)

    assert reading is not None
    assert reading.slots == (report["deviceCount"] if report["register"]["resourceName"] == GPU_RESOURCE else 0)


# --- the floors, on nodes carrying GFD's real labels ----------------------------------------------------------------


def h200_node(profile: str, labelled_under: str) -> dict[str, Any]:
    """dc1 naming `profile`, with every label GFD wrote on the H200 under the document `labelled_under`."""
    node = gpu_node("dc1", profile)
    node["metadata"]["labels"] |= gfd_labels(labelled_under)
    return node


def doctor(node: dict[str, Any], configmap: dict[str, int], facts: PoolFacts = PROD) -> Diagnosis:
    objects = replaced(replaced(healthy_pool(), node), time_slicing_configmap(configmap))
    return diagnose(Snapshot.from_items(dump(objects)["items"]), facts, DC1)


def floor(d: Diagnosis, name: str) -> tuple[bool | None, str]:
    found = next(f for f in d.floors if f.name == name)
    return found.ok, found.detail


@pytest.mark.parametrize(("profile", "replicas"), [("a1000-x4", 4), ("whole", 1)])
def test_a_node_with_gfds_real_labels_under_its_profile_passes_the_labels_and_sharing_floors(
    profile: str, replicas: int
) -> None:
    facts = PoolFacts(domains=(Domain("dc1", DC1, profile, replicas),), profile_slots={profile: replicas}, stack="p")
    d = doctor(h200_node(profile, f"replicas-{replicas}"), {profile: replicas}, facts)

    assert floor(d, "labels")[0] is True
    assert floor(d, "sharing-config") == (
        True,
        f"profile {profile} in gpu-operator/time-slicing-config: {replicas} slot{'s' if replicas > 1 else ''} per card",
    )
    assert d.healthy


def test_a_profile_edited_in_place_from_shared_to_whole_names_the_stale_shared_product_and_replicas() -> None:
    # a1000-x4 edited to replicas 1; the plugin restarted, GFD did not: its labels are still those of replicas 4.
    facts = PoolFacts(domains=(Domain("dc1", DC1, "a1000-x4", 1),), profile_slots={"a1000-x4": 1}, stack="prod")
    node = h200_node("a1000-x4", "replicas-4")
    node["status"]["allocatable"]["nvidia.com/gpu"] = node["status"]["capacity"]["nvidia.com/gpu"] = "1"

    d = doctor(node, {"a1000-x4": 1}, facts)

    assert d.first_broken == "sharing-config"
    assert floor(d, "sharing-config")[1] == (
        "GPU Feature Discovery labels an earlier version of profile a1000-x4: nvidia.com/gpu.replicas=4 (the profile "
        "gives 1); nvidia.com/gpu.sharing-strategy=time-slicing (the profile gives none); "
        "nvidia.com/gpu.product=NVIDIA-H200-SHARED (the profile's card is not shared, so without -SHARED). It "
        "reloads only when nvidia.com/device-plugin.config changes, not when the profile is edited in place"
    )
    assert d.fix is not None and d.fix.command == (
        f"kubectl -n gpu-operator delete pod -l app=gpu-feature-discovery --field-selector spec.nodeName={DC1}"
    )


def test_a_profile_edited_in_place_from_whole_to_shared_names_the_product_without_shared() -> None:
    facts = PoolFacts(domains=(Domain("dc1", DC1, "whole", 2),), profile_slots={"whole": 2}, stack="prod")
    d = doctor(h200_node("whole", "replicas-1"), {"whole": 2}, facts)

    ok, detail = floor(d, "sharing-config")
    assert ok is False
    assert "nvidia.com/gpu.replicas=1 (the profile gives 2)" in detail
    assert "nvidia.com/gpu.product=NVIDIA-H200 (the profile's card is a shared card's, with -SHARED)" in detail


def test_an_edit_that_keeps_the_card_shared_names_only_the_replicas() -> None:
    facts = PoolFacts(domains=(Domain("dc1", DC1, "a1000-x4", 2),), profile_slots={"a1000-x4": 2}, stack="prod")
    d = doctor(h200_node("a1000-x4", "replicas-4"), {"a1000-x4": 2}, facts)

    ok, detail = floor(d, "sharing-config")
    assert ok is False
    assert "nvidia.com/gpu.replicas=4 (the profile gives 2)." in detail
    assert "product" not in detail and "sharing-strategy" not in detail


def test_a_node_gfd_has_not_labelled_yet_is_not_stale() -> None:
    node = gpu_node("dc1", "a1000-x4")
    for key in ("nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", GPU_PRODUCT_LABEL):
        del node["metadata"]["labels"][key]

    assert floor(doctor(node, {"a1000-x4": 4, "whole": 1}), "sharing-config")[0] is True


def test_a_configmap_edited_by_hand_is_named_before_gfds_labels_which_still_match_the_stack() -> None:
    d = doctor(h200_node("a1000-x4", "replicas-4"), {"a1000-x4": 2, "whole": 1})

    assert floor(d, "sharing-config") == (
        False,
        "profile a1000-x4 in ConfigMap gpu-operator/time-slicing-config gives 2 slots per card, the stack's "
        "sharingProfiles.a1000-x4 gives 4",
    )


def test_without_a_stack_the_expected_capacity_is_the_profile_times_gfds_real_card_count() -> None:
    node = h200_node("a1000-x4", "replicas-4")

    d = doctor(node, {"a1000-x4": 4, "whole": 1}, PoolFacts())

    assert floor(d, "gpu-capacity") == (True, "allocatable nvidia.com/gpu 4, as profile a1000-x4 gives")


FIXTURE_BLOCK = re.compile(r"<!-- fixture: ([^ #]+)(?:#(\S+))? -->\n```(?:text|json)\n(.*?)```", re.DOTALL)


def test_the_labels_and_the_allocate_answer_docs_day2_shows_are_the_recorded_ones() -> None:
    blocks = FIXTURE_BLOCK.findall((ROOT / "docs" / "day2.md").read_text(encoding="utf-8"))

    assert len(blocks) == 2
    for path, pointer, shown in blocks:
        text = (ROOT / path).read_text(encoding="utf-8")
        if pointer:
            value: Any = json.loads(text)
            for part in pointer.split("/"):
                value = value[int(part)] if part.isdigit() else value[part]
            text = json.dumps(value, indent=2) + "\n"
        assert shown == text, path
