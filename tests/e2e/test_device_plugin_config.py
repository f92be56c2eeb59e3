"""The device plugin's own config loader (e2e/deviceplugin/profile-config, built against k8s-device-plugin's
`api/config/v1`) on every profile the program renders, run here for real: the recorded reading the fast tests
replay (tests/gpu_platform/test_time_slicing.py) is exactly what it prints, and a shape it reads differently from
the program's intent fails."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.e2e.servers import Tools
from tests.plugin_recording import (
    WRONG_SHAPES,
    loader_documents,
    program_documents,
    reading_differences,
    recorded_config,
)


@pytest.fixture(scope="module")
def readings(e2e_tools: Tools) -> dict[str, Any]:
    done = subprocess.run(
        [str(e2e_tools.profile_config)],
        input=json.dumps(loader_documents()),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def test_the_plugins_loader_prints_exactly_the_recorded_reading_of_every_document(readings: dict[str, Any]) -> None:
    recorded = {name: entry["reading"] for name, entry in recorded_config()["profiles"].items()}

    assert readings == recorded, (
        "the loader reads the documents differently from the recording: re-record with "
        "`python -m tests.plugin_recording record-config .tools/e2e/bin/profile-config`"
    )


def test_the_plugin_reads_every_profile_the_program_renders_as_the_program_means_it(readings: dict[str, Any]) -> None:
    misread = {
        name: reading_differences(readings[name], int(name.removeprefix("replicas-"))) for name in program_documents()
    }

    assert {name: found for name, found in misread.items() if found} == {}


@pytest.mark.parametrize("change", WRONG_SHAPES)
def test_a_deliberately_wrong_shape_is_read_differently_and_fails(readings: dict[str, Any], change: str) -> None:
    assert reading_differences(readings[f"wrong-{change}"], 4) != []
