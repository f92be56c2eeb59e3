"""Without the upstream data, the run's very last line says how many contract tests it skipped and what brings the
data in (tests/conftest.py), after pytest's own list of skip reasons and counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from refdata.fetch import ROOT

NEEDS_DATA = """
def test_reads_the_chart(upstream):
    assert upstream


def test_reads_the_crds(upstream):
    assert upstream


def test_needs_nothing():
    assert True
"""

# The suite's own conftest, with the default data folder pointed at an empty one (as on a fresh clone).
RUN = """
import sys
from pathlib import Path
import pytest
import refdata.fetch
refdata.fetch.DEFAULT_DEST = Path(sys.argv[1])
sys.exit(pytest.main([sys.argv[2], "-p", "tests.conftest", "-p", "no:randomly", "-p", "no:cacheprovider", "-ra"]))
"""


def test_the_last_line_counts_the_contract_tests_skipped_and_names_make_upstream(tmp_path: Path) -> None:
    (tmp_path / "test_needs_data.py").write_text(NEEDS_DATA, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("GPU_POOL_UPSTREAM_DIR", "CI", "PYTEST_ADDOPTS")}

    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path / "no-data"), str(tmp_path / "test_needs_data.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in lines[-2]
    assert lines[-1] == (
        "2 contract tests skipped: no upstream reference data here; `make upstream` fetches it from its public "
        "sources, `make upstream UPSTREAM_FROM=<mirror>` from a mirror"
    )
