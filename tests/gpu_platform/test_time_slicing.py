"""The time-slicing ConfigMap: one profile per key, in the format the device plugin actually reads."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from components.gpu_platform.time_slicing import (
    TIME_SLICING_CONFIGMAP,
    build_time_slicing_config,
    build_time_slicing_configmap,
)
from config.sharing import SharingProfile

# The article's plan: dc1 and dc2 time-sliced x4, dc3 whole.
ARTICLE_PROFILES = {"a1000-x4": SharingProfile(replicas=4), "whole": SharingProfile(replicas=1)}


def advertised_gpus_per_card(document: str) -> int:
    """How many nvidia.com/gpu the device plugin advertises per card under this config document.

    Mirrors the device plugin: only sharing.timeSlicing.resources multiplies a resource; the
    same-named keys under `flags` are not read (k8s-device-plugin#1433).
    """
    config = yaml.safe_load(document)
    assert config["version"] == "v1"
    resources = config.get("sharing", {}).get("timeSlicing", {}).get("resources", [])
    replicas = [entry["replicas"] for entry in resources if entry["name"] == "nvidia.com/gpu"]
    return replicas[0] if replicas else 1


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


def test_rename_and_fail_flags_sit_under_sharing_time_slicing_where_the_plugin_reads_them() -> None:
    document = parsed(SharingProfile(replicas=4))

    assert set(document["flags"]) == {"migStrategy"}
    assert "renameByDefault" in document["sharing"]["timeSlicing"]
    assert "failRequestsGreaterThanOne" in document["sharing"]["timeSlicing"]


def test_shared_cards_keep_the_plain_nvidia_com_gpu_name_so_workloads_need_no_change() -> None:
    document = parsed(SharingProfile(replicas=4))

    assert document["sharing"]["timeSlicing"]["renameByDefault"] is False
    assert document["sharing"]["timeSlicing"]["resources"][0]["name"] == "nvidia.com/gpu"


@pytest.mark.parametrize("replicas", [2, 4, 8, 64])
def test_a_card_shared_n_ways_advertises_n_gpus(replicas: int) -> None:
    data = build_time_slicing_config({"shared": SharingProfile(replicas=replicas)})

    assert advertised_gpus_per_card(data["shared"]) == replicas


def test_a_whole_card_profile_is_a_valid_config_that_advertises_one_gpu() -> None:
    data = build_time_slicing_config({"whole": SharingProfile(replicas=1)})
    document = yaml.safe_load(data["whole"])

    assert document == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert advertised_gpus_per_card(data["whole"]) == 1


def test_the_articles_plan_gives_four_gpus_on_shared_cards_and_one_on_the_whole_card() -> None:
    data = build_time_slicing_config(ARTICLE_PROFILES)

    assert {key: advertised_gpus_per_card(value) for key, value in data.items()} == {
        "a1000-x4": 4,
        "whole": 1,
    }


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
