"""The upstream files knowledge/driver_template.py was read from are the ones pinned there: a new chart or operator
source fails here, naming the file to re-read before the driver template's digest can be trusted again."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from knowledge.driver_template import DRIVER_TEMPLATE_SECTIONS, DRIVER_TEMPLATE_SOURCES, NOT_IN_TEMPLATE


@pytest.mark.parametrize("path", sorted(DRIVER_TEMPLATE_SOURCES))
def test_the_file_the_driver_template_was_read_from_is_unchanged(upstream: Path, path: str) -> None:
    found = hashlib.sha256((upstream / path).read_bytes()).hexdigest()
    assert found == DRIVER_TEMPLATE_SOURCES[path], (
        f"{path} changed (sha256 {found}): re-read what it renders into the driver DaemonSet's pod template, update "
        "DRIVER_TEMPLATE_SECTIONS and NOT_IN_TEMPLATE in knowledge/driver_template.py if that moved, then its pin"
    )


@pytest.mark.parametrize("chart", ["v26.3.2", "v26.7.0"])
def test_every_section_the_digest_reads_is_rendered_into_the_clusterpolicy(upstream: Path, chart: str) -> None:
    template = (upstream / "gpu-operator" / chart / "chart" / "templates" / "clusterpolicy.yaml").read_text()
    for section in DRIVER_TEMPLATE_SECTIONS:
        assert re.search(rf"\.Values\.{section}\b", template), (
            f"{chart}: templates/clusterpolicy.yaml reads no {section}"
        )


def test_transform_driver_reads_the_driver_spec_and_the_common_daemonset_config_but_not_the_upgrade_policy(
    upstream: Path,
) -> None:
    source = (upstream / "gpu-operator-src" / "v26.7.0" / "controllers" / "object_controls.go").read_text()
    start = source.index("func TransformDriver(")
    body = source[start : source.index("\n}\n", start)]
    assert "config.Driver" in body and "UpgradePolicy" not in body
    assert '"nvidia-driver-daemonset":                     TransformDriver' in source
    assert "applyCommonDaemonsetConfig(obj, &n.singleton.Spec)" in source
    assert "applyCommonDaemonsetMetadata(obj, &n.singleton.Spec.Daemonsets)" in source
    assert set(NOT_IN_TEMPLATE) == {"driver.upgradePolicy"}
