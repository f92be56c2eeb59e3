"""The makes a benchmark starts do not inherit the command-line variables of the `make bench` that started it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.settings import without_make_variables


def test_make_bench_args_do_not_reach_the_makes_the_benchmark_starts(tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not on PATH")
    (tmp_path / "Makefile").write_text("ARGS ?=\nshow:\n\t@echo 'args=[$(ARGS)]'\n")
    # What `make bench ARGS=--e2e-cold` hands its children: the variable rides in MAKEFLAGS.
    parent = dict(os.environ) | {"MAKEFLAGS": " -- ARGS=--e2e-cold", "MAKELEVEL": "1"}

    inherited = subprocess.run([make, "-s", "show"], cwd=tmp_path, env=parent, capture_output=True, text=True)
    cleaned = subprocess.run(
        [make, "-s", "show"], cwd=tmp_path, env=without_make_variables(parent), capture_output=True, text=True
    )

    assert inherited.stdout.strip() == "args=[--e2e-cold]"
    assert cleaned.stdout.strip() == "args=[]"
