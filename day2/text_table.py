"""A plain text table, columns as wide as their widest cell: the day-2 reports that need no rich (claims --usage,
claims --reclaimable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO


def write_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line in (headers, *rows):
        out.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() + "\n")
