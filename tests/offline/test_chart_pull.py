"""`make chart`: helm pull of exactly the stack's pinned chart, an archive the stack can then name."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from config.gpu_operator import GpuOperatorConfig
from offline.chart_pull import main
from tests.chart_archive import package_chart

STAND_IN = """#!/bin/sh
# helm's stand-in: records its arguments and writes the archive helm pull would (from a packaged chart).
echo "$@" > "$HELM_ARGS"
while [ $# -gt 0 ]; do [ "$1" = "-d" ] && cp "$HELM_ARCHIVE" "$2/"; shift; done
"""


def test_make_chart_pulls_the_pinned_version_from_the_stacks_repository_and_the_stack_accepts_it(
    upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helm = bin_dir / "helm"
    helm.write_text(STAND_IN)
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    archive = package_chart(upstream / "gpu-operator" / "v26.7.0" / "chart", "v26.7.0", tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HELM_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("HELM_ARCHIVE", str(archive))

    assert main(["--stack", "prod", "--out", str(tmp_path / "charts")]) == 0

    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["pull", "gpu-operator"]
    assert args[args.index("--repo") + 1] == "https://helm.ngc.nvidia.com/nvidia"
    assert args[args.index("--version") + 1] == "v26.7.0"
    pulled = tmp_path / "charts" / "gpu-operator-v26.7.0.tgz"
    assert f"chart: {pulled}" in capsys.readouterr().out
    assert GpuOperatorConfig.model_validate({"chart": str(pulled)}).local_chart() is not None


def test_make_chart_without_helm_says_so_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["--stack", "prod", "--out", str(tmp_path / "charts")]) == 2
    assert "make chart needs helm on PATH" in capsys.readouterr().err
