"""`doctor` names traps by the number and title of the docs' traps table, so the two must not drift apart.

The table lives in docs/traps.md (README.md before it moved there); day2/doctor/traps.py holds the titles once.
"""

from __future__ import annotations

import re
from pathlib import Path

from day2.doctor.traps import OTHER_TRAPS, TRAPS, trap

ROOT = Path(__file__).resolve().parents[2]
TABLE_ROW = re.compile(r"^\|\s*(\d{1,2})\s*\|\s*([^|]+?)\s*\|", re.MULTILINE)


def documented_traps() -> tuple[Path, dict[int, str]]:
    """Number -> title from the first document (docs/traps.md, then README.md) that has the table."""
    for path in (ROOT / "docs" / "traps.md", ROOT / "README.md"):
        if not path.is_file():
            continue
        rows = {
            int(n): title.replace("`", "").strip() for n, title in TABLE_ROW.findall(path.read_text(encoding="utf-8"))
        }
        if set(range(1, 14)) <= set(rows):
            return path, {n: rows[n] for n in range(1, 14)}
    raise AssertionError("no traps table numbered 1-13 in docs/traps.md or README.md")


def test_the_trap_titles_doctor_names_are_the_ones_of_the_docs_table() -> None:
    path, documented = documented_traps()

    assert dict(TRAPS) == documented, f"day2/doctor/traps.py and {path.relative_to(ROOT)} disagree"


def test_a_trap_is_named_by_number_and_title() -> None:
    assert trap(13) == "trap 13: The DCGM exporter gets OOM-killed right after logging DCGM successfully initialized!"


def test_the_other_traps_doctor_names_are_rows_of_the_docs_table() -> None:
    text = (ROOT / "docs" / "traps.md").read_text(encoding="utf-8").replace("`", "")
    section = text.split("## The article's other traps", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")}

    assert set(OTHER_TRAPS) <= rows
