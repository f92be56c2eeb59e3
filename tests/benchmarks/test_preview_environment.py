"""`make real-preview` and the benchmark's real-engine row give a preview the same settings (e2e/preview.env)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.settings import PREVIEW_ENV, ROOT, BenchError, read_env_file


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_real_preview_runs_pulumi_preview_with_every_setting_the_benchmark_measures() -> None:
    recipe = subprocess.run(
        ["make", "-n", "real-preview", "STACK=mylab"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    command = recipe.split("pulumi preview")[0].splitlines()[-1]
    assert PREVIEW_ENV, "e2e/preview.env sets nothing"
    for key, value in PREVIEW_ENV.items():
        assert f"{key}={value}" in command.split(), recipe


def test_the_preview_settings_skip_the_per_step_snapshot_and_are_read_as_key_value_lines(tmp_path: Path) -> None:
    assert PREVIEW_ENV == {"PULUMI_SKIP_CHECKPOINTS": "true"}
    written = tmp_path / "preview.env"
    written.write_text("# a comment\n\nA=1\nB_2=two\n")
    assert read_env_file(written) == {"A": "1", "B_2": "two"}


def test_a_line_the_makefile_could_not_paste_in_front_of_the_command_is_refused(tmp_path: Path) -> None:
    written = tmp_path / "preview.env"
    written.write_text("A = two words\n")
    with pytest.raises(BenchError, match="not a KEY=VALUE line"):
        read_env_file(written)
