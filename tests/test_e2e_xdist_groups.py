"""`make e2e` in parallel keeps each xdist group on one worker (issue 46, tests/e2e/xdist_groups.py): a real
pytest-xdist run of a small suite with the e2e tier's hooks, three workers, one group spread over two modules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from benchmarks.settings import ROOT

# The four hooks tests/e2e/conftest.py gives the tier, as they are there.
CONFTEST = """\
from tests.e2e import xdist_groups


def pytest_configure(config):
    xdist_groups.name_folder(config)


def pytest_unconfigure(config):
    xdist_groups.remove_folder(config)


def pytest_xdist_make_scheduler(config, log):
    return xdist_groups.make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    xdist_groups.publish(config, items)
"""
GROUPED = """\
import pytest

pytestmark = pytest.mark.xdist_group("one-stack")


@pytest.mark.parametrize("case", range({count}))
def test_case(case):
    pass
"""
UNGROUPED = """\
import pytest


@pytest.mark.parametrize("case", range(6))
def test_alone(case):
    pass
"""
RAN = re.compile(r"^\[(gw\d+)\] .*(PASSED|FAILED) (\S+?\.py)::(\S+)")


def workers_by_module(tmp_path: Path, *options: str) -> dict[str, set[str]]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_first.py").write_text(GROUPED.format(count=5))
    (tmp_path / "test_second.py").write_text(GROUPED.format(count=4))
    (tmp_path / "test_other.py").write_text(UNGROUPED)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-v", "-n", "3", *options],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen: dict[str, set[str]] = defaultdict(set)
    for line in done.stdout.splitlines():
        if found := RAN.match(line):
            seen[found.group(3)].add(found.group(1))
    assert sum(1 for line in done.stdout.splitlines() if RAN.match(line)) == 15, done.stdout[-3000:]
    return seen


def test_a_group_over_two_modules_runs_on_one_worker_and_the_rest_beside_it(tmp_path: Path) -> None:
    seen = workers_by_module(tmp_path, "--dist", "loadgroup", "--no-loadscope-reorder")

    assert len(seen["test_first.py"] | seen["test_second.py"]) == 1, seen
    assert seen["test_other.py"] - seen["test_first.py"], f"nothing ran beside the group: {seen}"
