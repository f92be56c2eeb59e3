"""A test that runs `make` runs it as a user would, not with the variables of the `make test` or `make e2e` that
started the tests (issue 46: `make e2e ARGS="--durations=40"` made the e2e test's own `make diff` fail with
"unrecognized arguments")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.settings import ROOT, makefile_parameters, without_make_variables
from tests import conftest

ARGS = "--durations=40"
# A target beside the project's Makefile that writes its recipe's environment: what a test started by `make e2e
# ARGS=...` inherits (the pytest recipe's environment, less what the recipe line itself adds).
PROBE = """\
probe:
\t@$(PYTHON) -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))' $(TO)
"""


def make() -> str:
    found = shutil.which("make")
    if found is None:
        pytest.skip("make is not on PATH")
    return found


def recipe_environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "probe.mk").write_text(PROBE)
    to = tmp_path / "env.json"
    command = [make(), "-s", "-f", "Makefile", "-f", str(tmp_path / "probe.mk"), "probe", f"ARGS={ARGS}"]
    subprocess.run(
        [*command, f"PYTHON={sys.executable}", f"TO={to}"],
        cwd=ROOT,
        env=without_make_variables(dict(os.environ)),
        check=True,
        timeout=120,
    )
    environment: dict[str, str] = json.loads(to.read_text())
    return environment


def make_diff_command(env: dict[str, str]) -> str:
    """What `make diff` would run (`-n`: printed, not run)."""
    done = subprocess.run(
        [make(), "-n", "--no-print-directory", "diff", "BEFORE=before.yaml", "AFTER=after.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def test_a_make_under_make_e2e_with_args_would_pass_them_on_to_its_own_command(tmp_path: Path) -> None:
    inherited = recipe_environment(tmp_path)

    assert inherited["ARGS"] == ARGS and ARGS in inherited["MAKEFLAGS"]
    assert ARGS in make_diff_command(inherited)


def test_without_the_callers_make_variables_a_make_diff_runs_as_a_user_types_it(tmp_path: Path) -> None:
    cleaned = without_make_variables(recipe_environment(tmp_path))

    assert not {"ARGS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"} & set(cleaned)
    assert ARGS not in make_diff_command(cleaned)


def test_every_parameter_of_the_makefile_is_dropped_and_its_exported_variables_stay() -> None:
    parameters = makefile_parameters()

    assert {"ARGS", "STACK", "OUT", "BEFORE", "AFTER", "NODES", "ENGINE", "TEST_WORKERS"} <= parameters
    # `export GPU_POOL_UPSTREAM_DIR ?=` is meant for the tests: where the upstream data is.
    assert "GPU_POOL_UPSTREAM_DIR" not in parameters


def test_the_test_session_drops_them_before_any_test_or_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"ARGS": ARGS, "MAKEFLAGS": f" -- ARGS={ARGS}", "MAKELEVEL": "1", "STACK": "minimal"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("GPU_POOL_UPSTREAM_DIR", "/mirror")

    conftest.pytest_configure(pytest.Config.__new__(pytest.Config))

    assert not {"ARGS", "MAKEFLAGS", "MAKELEVEL", "STACK"} & set(os.environ)
    # What the caller meant for the tests themselves stays.
    assert os.environ["CI"] == "1" and os.environ["GPU_POOL_UPSTREAM_DIR"] == "/mirror"
