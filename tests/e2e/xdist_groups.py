"""`make e2e` in parallel (issue 46): pytest-xdist's `--dist loadgroup`, each `xdist_group` on one worker.

pytest-xdist 3.8 puts a test's group into its id on the worker (`item._nodeid = nodeid@group`), and its scheduler
reads the group back from the id; pytest 9.2 keeps a node's id in `item._id` instead, so under the versions this
project locks every test of a group went to any worker, the module fixtures of a group started once per worker and
tests sharing one stack ran beside each other's changes. Here the workers publish each test's group, from its
`xdist_group` mark, to a folder the controller names (`GROUPS_ENV`), and the controller's scheduler (xdist's own
LoadScopeScheduling, through its `pytest_xdist_make_scheduler` hook) reads them: each group is one work unit, run
by one worker in collection order. A test with no group is a unit of its own, as in xdist's loadgroup.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_ENV = "GPU_POOL_E2E_XDIST_GROUPS"


def group_of(item: pytest.Item) -> str | None:
    """The test's group, named as xdist's loadgroup names it (the mark's first argument, or `name=`)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def name_folder(config: pytest.Config) -> None:
    """On the controller of a `--dist loadgroup` run, before its workers start (they inherit the environment)."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") != "loadgroup":
        return
    os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="e2e-xdist-groups-")


def remove_folder(config: pytest.Config) -> None:
    folder = os.environ.get(GROUPS_ENV)
    if folder is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(folder, ignore_errors=True)
        del os.environ[GROUPS_ENV]


def publish(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: every collected test's group, for the controller's scheduler."""
    folder = os.environ.get(GROUPS_ENV)
    if folder is None or not hasattr(config, "workerinput"):
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    worker = config.workerinput["workerid"]
    written = Path(folder) / f"{worker}.json.tmp"
    written.write_text(json.dumps(groups))
    written.replace(Path(folder) / f"{worker}.json")  # whole or not at all: the controller may read it next


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type information
    """xdist's scope scheduling with the published groups as scopes; every worker collected the same tests (xdist
    checks), so one worker's file serves."""

    def __init__(self, config: pytest.Config, log: object, folder: Path) -> None:
        super().__init__(config, log)
        self.folder = folder
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            published = sorted(self.folder.glob("*.json"))
            assert published, f"no worker published its xdist groups in {self.folder}"
            self.groups = json.loads(published[0].read_text())
        group = self.groups.get(nodeid)
        return f"group:{group}" if group is not None else nodeid


def make_scheduler(config: pytest.Config, log: object) -> GroupScheduling | None:
    folder = os.environ.get(GROUPS_ENV)
    if folder is None or config.getoption("dist", "no") != "loadgroup":
        return None
    return GroupScheduling(config, log, Path(folder))
