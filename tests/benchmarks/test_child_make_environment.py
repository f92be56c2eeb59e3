"""The makes a benchmark starts do not inherit the command-line variables of the `make bench` that started it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.settings import ROOT

# The outer recipe plays `make bench`: it starts a child make the way benchmarks/ does, with or without the cleaning.
MAKEFILE = """\
ARGS ?=
outer:
\t@$(PYTHON) child.py $(CLEAN)
inner:
\t@echo "args=[$(ARGS)]"
"""
CHILD = """\
import os, subprocess, sys
sys.path.insert(0, sys.argv[2])
from benchmarks.settings import without_make_variables
env = without_make_variables(dict(os.environ)) if sys.argv[1] == "clean" else dict(os.environ)
print(subprocess.run(["make", "-s", "inner"], env=env, capture_output=True, text=True, check=True).stdout.strip())
"""


def child_sees(tmp_path: Path, clean: str) -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not on PATH")
    (tmp_path / "Makefile").write_text(MAKEFILE)
    (tmp_path / "child.py").write_text(CHILD)
    command = [make, "-s", "outer", "ARGS=--e2e-cold", f"PYTHON={sys.executable}", f"CLEAN={clean} {ROOT}"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()


def test_a_make_started_by_make_bench_with_args_would_inherit_them(tmp_path: Path) -> None:
    assert child_sees(tmp_path, "inherit") == "args=[--e2e-cold]"


def test_the_makes_the_benchmark_starts_do_not_see_make_benchs_args(tmp_path: Path) -> None:
    assert child_sees(tmp_path, "clean") == "args=[]"
