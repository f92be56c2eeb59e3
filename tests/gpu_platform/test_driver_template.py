"""The driver template's digest moves with every value that renders into the driver DaemonSet's pod template, and
with nothing else (components/gpu_platform/driver_template.py)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.gpu_platform.driver_template import (
    driver_template_digest,
    driver_template_inputs,
    mounts_digest,
    stack_release_values,
)
from components.gpu_platform.trusted_ca import build_trusted_ca_configmap
from knowledge.driver_template import DRIVER_MOUNTS_ENV, DRIVER_TEMPLATE_SECTIONS, ONLY_WHEN_ENABLED
from tests.plugin_recording import stack_config

CHART = "v26.7.0"
SECTIONS_ELSEWHERE = ("devicePlugin", "dcgmExporter", "toolkit", "gfd", "migManager", "nodeStatusExporter", "validator")
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
leaves = st.one_of(st.booleans(), st.integers(0, 9999), names)


def _values() -> dict[str, Any]:
    return stack_release_values(stack_config("prod"), crds_registered=False)


def _set(values: dict[str, Any], section: str, key: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    changed.setdefault(section, {})
    changed[section] = dict(changed[section]) if isinstance(changed[section], dict) else {}
    changed[section][f"x{key}"] = value
    if section in ONLY_WHEN_ENABLED:
        changed[section]["enabled"] = True
    return changed


@settings(max_examples=60, deadline=None)
@given(section=st.sampled_from(DRIVER_TEMPLATE_SECTIONS), key=names, value=leaves)
def test_any_new_value_under_a_template_section_moves_the_digest(section: str, key: str, value: Any) -> None:
    values = _values()
    assert driver_template_digest(_set(values, section, key, value), CHART) != driver_template_digest(values, CHART)


@settings(max_examples=60, deadline=None)
@given(section=st.sampled_from(SECTIONS_ELSEWHERE), key=names, value=leaves)
def test_no_value_of_another_operand_moves_the_digest(section: str, key: str, value: Any) -> None:
    values = _values()
    assert driver_template_digest(_set(values, section, key, value), CHART) == driver_template_digest(values, CHART)


@settings(max_examples=30, deadline=None)
@given(key=names, value=leaves)
def test_the_upgrade_policy_is_the_upgrade_controllers_and_never_moves_the_digest(key: str, value: Any) -> None:
    values = _values()
    changed = copy.deepcopy(values)
    changed["driver"]["upgradePolicy"][key] = value
    assert driver_template_digest(changed, CHART) == driver_template_digest(values, CHART)
    assert "upgradePolicy" not in driver_template_inputs(changed, CHART)["driver"]


def test_the_chart_version_alone_moves_the_digest() -> None:
    values = _values()
    assert driver_template_digest(values, "v26.3.2") != driver_template_digest(values, CHART)


def test_the_operator_image_moves_the_digest_and_its_other_settings_do_not() -> None:
    values = _values()
    image = _set(values, "operator", "", None)
    image["operator"] = {**values["operator"], "version": "v26.7.1"}
    crds = copy.deepcopy(values)
    crds["operator"]["upgradeCRD"] = not values["operator"]["upgradeCRD"]
    assert driver_template_digest(image, CHART) != driver_template_digest(values, CHART)
    assert driver_template_digest(crds, CHART) == driver_template_digest(values, CHART)


def test_a_ca_rotation_reaches_the_driver_container_as_its_mounts_digest() -> None:
    one = build_trusted_ca_configmap("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "gpu-operator")
    two = build_trusted_ca_configmap("-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n", "gpu-operator")
    assert mounts_digest([one]) != mounts_digest([two]) and mounts_digest([]) is None


def test_a_stack_that_mounts_nothing_has_no_mounts_variable_in_the_driver_env() -> None:
    env = _values()["driver"].get("env") or []
    assert DRIVER_MOUNTS_ENV not in {item["name"] for item in env}


@settings(max_examples=40, deadline=None)
@given(path=st.sampled_from(ONLY_WHEN_ENABLED), key=names, value=leaves)
def test_a_disabled_sidecars_settings_render_nothing_and_move_nothing_until_it_is_enabled(
    path: str, key: str, value: Any
) -> None:
    values = _values()
    *parents, last = path.split(".")
    changed = copy.deepcopy(values)
    holder = changed
    for parent in parents:
        holder = holder[parent]
    holder[last] = {"enabled": False, f"x{key}": value}
    assert driver_template_digest(changed, CHART) == driver_template_digest(values, CHART)
    holder[last]["enabled"] = True
    assert driver_template_digest(changed, CHART) != driver_template_digest(values, CHART)
