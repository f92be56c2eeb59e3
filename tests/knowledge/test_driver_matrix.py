"""The driver pin is checked against the chart's supported drivers before anything is deployed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from components.gpu_platform.operator_values import build_gpu_operator_values
from config.errors import format_validation_error
from config.gpu_operator import GpuOperatorConfig
from knowledge.driver_matrix import (
    RECOMMENDED_DRIVERS,
    SUPPORTED_DRIVERS,
    chart_deprecation,
    driver_problem,
    nearest_supported,
    supported_drivers,
)

ARTICLE_CHART = "v26.3.2"
ARTICLE_DRIVER = "570.133.20"


def config_errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        GpuOperatorConfig.model_validate(data)
    return format_validation_error(caught.value)


def test_the_articles_570_133_20_is_refused_on_v26_3_2_and_570_211_01_suggested() -> None:
    messages = config_errors({"chartVersion": ARTICLE_CHART, "driverVersion": ARTICLE_DRIVER})

    assert len(messages) == 1
    assert ARTICLE_DRIVER in messages[0]
    assert "the nearest supported R570 driver is 570.211.01" in messages[0]
    assert "allowUnsupportedDriver" in messages[0]


def test_the_refusal_lists_every_supported_driver_so_the_user_can_pick_one() -> None:
    message = driver_problem(ARTICLE_CHART, ARTICLE_DRIVER)

    assert message is not None
    for driver in SUPPORTED_DRIVERS[ARTICLE_CHART]:
        assert driver in message


def test_the_refusal_names_the_r570_nvml_bug_the_old_driver_carries() -> None:
    message = driver_problem(ARTICLE_CHART, ARTICLE_DRIVER)

    assert message is not None
    assert "gpu-operator#1361" in message


def test_a_fixed_r570_that_is_still_unlisted_is_refused_without_blaming_the_nvml_bug() -> None:
    message = driver_problem(ARTICLE_CHART, "570.195.03")

    assert message is not None
    assert "#1361" not in message
    assert "570.211.01" in message


def test_allow_unsupported_driver_lets_the_articles_driver_through_to_the_chart_values() -> None:
    cfg = GpuOperatorConfig.model_validate({"driverVersion": ARTICLE_DRIVER, "allowUnsupportedDriver": True})

    values = build_gpu_operator_values(
        cfg,
        time_slicing_configmap="time-slicing-config",
        default_profile=None,
        dcgm_metrics_configmap="dcgm-metrics",
        dcgm_metrics_digest="0123456789abcdef",
        service_monitor=False,
    )

    assert values["driver"]["version"] == ARTICLE_DRIVER


def test_the_default_driver_is_nvidias_recommended_one_and_passes_the_check() -> None:
    cfg = GpuOperatorConfig()

    assert cfg.driver_version == RECOMMENDED_DRIVERS[cfg.chart_version]
    assert driver_problem(cfg.chart_version, cfg.driver_version) is None


def test_a_chart_missing_from_the_table_is_refused_because_its_drivers_cannot_be_checked() -> None:
    messages = config_errors({"chartVersion": "v26.9.0"})

    assert "v26.9.0" in messages[0]
    assert "compatibility table" in messages[0]


def test_allow_unsupported_driver_also_lets_an_unknown_chart_through() -> None:
    cfg = GpuOperatorConfig.model_validate({"chartVersion": "v26.9.0", "allowUnsupportedDriver": True})

    assert cfg.chart_version == "v26.9.0"


@pytest.mark.parametrize("chart", ["v26.3.0", "v26.3.1", "v26.3.2", "v26.3.3"])
def test_every_v26_3_patch_release_supports_the_same_eleven_drivers(chart: str) -> None:
    drivers = supported_drivers(chart)

    assert drivers is not None
    assert len(drivers) == 11
    assert set(drivers) == set(SUPPORTED_DRIVERS["v26.3.2"])
    assert "570.211.01" in drivers
    assert ARTICLE_DRIVER not in drivers


def test_a_chart_version_outside_the_table_has_no_supported_drivers() -> None:
    assert supported_drivers("v99.0.0") is None
    assert nearest_supported("v99.0.0", "580.173.02") is None


def test_the_nearest_driver_stays_on_the_same_branch_even_when_another_branch_is_closer() -> None:
    # 579.999.99 is numerically next to 580.x, but a different branch is a different driver ABI.
    assert nearest_supported(ARTICLE_CHART, "579.999.99") is None
    assert nearest_supported(ARTICLE_CHART, "536.10.01") is None


def test_the_nearest_driver_is_nearest_on_the_version_line() -> None:
    assert nearest_supported(ARTICLE_CHART, "580.150.00") == "580.159.03"
    assert nearest_supported(ARTICLE_CHART, "580.130.00") == "580.126.20"
    assert nearest_supported(ARTICLE_CHART, "535.300.00") == "535.309.01"


def test_an_exact_tie_prefers_the_newer_driver() -> None:
    # 580.163.06 sits exactly between 580.159.04 and 580.167.08.
    assert nearest_supported(ARTICLE_CHART, "580.163.06") == "580.167.08"


def test_a_bare_branch_maps_to_the_newest_driver_of_that_branch() -> None:
    assert nearest_supported(ARTICLE_CHART, "580") == "580.173.02"
    assert nearest_supported(ARTICLE_CHART, "595") == "595.71.05"


def test_a_branch_with_no_supported_driver_gets_the_recommended_one_suggested() -> None:
    message = driver_problem(ARTICLE_CHART, "575.57.08")

    assert message is not None
    assert "no R575 driver is supported" in message
    assert RECOMMENDED_DRIVERS[ARTICLE_CHART] in message


def test_precompiled_branch_pins_are_checked_by_branch() -> None:
    assert driver_problem(ARTICLE_CHART, "580") is None
    problem = driver_problem(ARTICLE_CHART, "575")
    assert problem is not None
    assert "R575" in problem


def test_precompiled_with_a_supported_branch_is_accepted() -> None:
    cfg = GpuOperatorConfig.model_validate({"usePrecompiled": True, "driverVersion": "580"})

    assert cfg.driver_version == "580"


def test_precompiled_with_an_unsupported_branch_is_refused() -> None:
    messages = config_errors({"usePrecompiled": True, "driverVersion": "575"})

    assert "R575" in messages[0]


def test_something_that_is_not_a_driver_version_is_refused() -> None:
    assert driver_problem(ARTICLE_CHART, "latest") is not None
    messages = config_errors({"driverVersion": "latest"})
    assert "driverVersion" in messages[0]


def test_chart_v26_7_0_supports_nvidias_three_drivers_and_recommends_595() -> None:
    # life-cycle-policy.rst at cloud-native-docs 52dcb7b8d956, lines 93-99.
    assert SUPPORTED_DRIVERS["v26.7.0"] == ("595.91.07", "580.173.02", "535.309.01")
    assert RECOMMENDED_DRIVERS["v26.7.0"] == "595.91.07"


def test_the_articles_r570_moves_to_r580_or_r595_with_the_26_7_chart() -> None:
    message = driver_problem("v26.7.0", "570.211.01")

    assert message is not None and "no R570 driver is supported, NVIDIA recommends 595.91.07" in message


def test_the_26_3_line_is_deprecated_and_26_7_is_not() -> None:
    deprecation = chart_deprecation("v26.3.2")

    assert deprecation is not None and "deprecated upstream" in deprecation and "v26.7.0" in deprecation
    assert chart_deprecation("v26.7.0") is None
