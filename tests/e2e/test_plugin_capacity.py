"""The cluster stand-in's GPU capacity comes from the device plugin's recorded run, per card, times the cards."""

from __future__ import annotations

import pytest

from components.gpu_platform.time_slicing import build_time_slicing_config
from config.sharing import SharingProfile
from tests.e2e.plugin_capacity import UnrecordedProfile, advertised
from tests.plugin_recording import shipped_stacks, stack_config


@pytest.mark.parametrize("stack", shipped_stacks())
def test_each_domains_node_gets_what_the_plugin_advertised_which_is_what_its_gate_waits_for(stack: str) -> None:
    cfg = stack_config(stack)
    data = build_time_slicing_config(cfg.sharing_profiles)

    assert {d.name: advertised(data, d.sharing, len(d.cards)) for d in cfg.failure_domains} == {
        d.name: cfg.slots(d) for d in cfg.failure_domains
    }


def test_a_node_without_a_profile_or_naming_a_missing_one_is_played_as_a_whole_card_per_card() -> None:
    data = build_time_slicing_config({"x4": SharingProfile(replicas=4)})

    assert advertised(data, None, 2) == 2
    assert advertised(data, "gone", 1) == 1


def test_a_document_the_plugin_never_ran_on_is_refused_rather_than_guessed() -> None:
    with pytest.raises(UnrecordedProfile, match="no recorded device-plugin run"):
        advertised({"odd": "version: v1\nsharing:\n  mps:\n    resources: []\n"}, "odd", 1)
