"""Issue 42's cut leaves an existing stack as it is: the state `pulumi up` of today's main (c7e9ef1) writes
previews with this tree's program as all `same`.

On the shared `deployed` stack (tests/e2e/engine_deployed.py): its project is linked to main's program (`git
archive` of MAIN, the program's entries only), `pulumi up` runs it, so every resource in the state is as main
registers it; then the project is linked back to this tree and previewed. Main's `up` itself must change nothing
either (both programs register the same inputs, in both directions). The project is this tree's again after.
"""

from __future__ import annotations

import subprocess
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest

from offline.runner import ROOT_DIR
from tests.e2e.engine import PROGRAM_ENTRIES, PulumiStack
from tests.e2e.engine_deployed import Deployed, changed, last_update, preview

# main when issue 42's cut was made: the state a user's stack holds before it.
MAIN = "c7e9ef1"


def main_program(dest: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT_DIR), "archive", "--format=tar", MAIN, *PROGRAM_ENTRIES],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        pytest.fail(f"git archive {MAIN} failed (a clone without main's history?): {archive.stderr.decode()[-500:]}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def link_program(stack: PulumiStack, root: Path) -> None:
    for entry in PROGRAM_ENTRIES:
        link = stack.project_dir / entry
        link.unlink()
        link.symlink_to(root / entry)


@pytest.fixture
def main_wrote_the_state(deployed: Deployed, tmp_path: Path) -> Iterator[Deployed]:
    main = main_program(tmp_path / "main")
    link_program(deployed.stack, main)
    assert (deployed.stack.project_dir / "__main__.py").resolve() == (main / "__main__.py").resolve()
    try:
        deployed.stack.up()
        yield deployed
    finally:
        link_program(deployed.stack, ROOT_DIR)


def test_the_state_mains_up_wrote_previews_all_same_with_this_program(main_wrote_the_state: Deployed) -> None:
    stack = main_wrote_the_state.stack
    assert set(last_update(stack)["resourceChanges"]) == {"same"}, "main's up changed what this tree created"
    link_program(stack, ROOT_DIR)
    document, failure = preview(stack)
    assert failure == "", failure[-3000:]
    assert changed(document) == {}
