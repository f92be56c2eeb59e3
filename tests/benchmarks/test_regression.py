"""`make bench` holds its ratios (benchmarks/regression.py): one more than 10% above BENCHMARKS.md's value, or more
than the run's own spread where that is larger, is reported as a regression naming the case; nothing else is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.regression import HELD_HEADING, Ratio, ratio_of_turns, read_held, regressions, render_held

CASE = "real engine, 100 domains: prod / floor (b)"


def test_a_ratio_more_than_ten_percent_above_the_recorded_one_is_a_regression_naming_the_case() -> None:
    found = regressions({CASE: 1.20}, [Ratio(CASE, 1.33, spread=0.02)])
    assert len(found) == 1
    assert CASE in found[0]
    assert "1.33x" in found[0] and "1.20x" in found[0]


def test_a_ratio_within_ten_percent_of_the_recorded_one_is_not() -> None:
    assert regressions({CASE: 1.20}, [Ratio(CASE, 1.31, spread=0.02)]) == []


def test_a_ratio_within_the_runs_own_spread_is_not_even_above_ten_percent() -> None:
    assert regressions({CASE: 1.20}, [Ratio(CASE, 1.40, spread=0.20)]) == []
    assert len(regressions({CASE: 1.20}, [Ratio(CASE, 1.45, spread=0.20)])) == 1


def test_a_faster_run_and_a_case_not_yet_recorded_are_no_regression() -> None:
    assert regressions({CASE: 1.20}, [Ratio(CASE, 0.90, spread=0.0), Ratio("new case", 9.0, spread=0.0)]) == []


def test_only_the_regressed_cases_are_named() -> None:
    other = "real engine, 30 domains: prod / floor (a)"
    found = regressions({CASE: 1.0, other: 1.0}, [Ratio(CASE, 1.5, 0.0), Ratio(other, 1.05, 0.0)])
    assert [CASE in message for message in found] == [True]


@given(
    st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9 ,:/()>-]{0,40}[a-z0-9)]", fullmatch=True),
                  st.floats(0.01, 99.0), st.floats(0.0, 0.99)),
        min_size=1, max_size=8, unique_by=lambda row: row[0],
    )
)  # fmt: skip
def test_the_held_table_reads_back_what_it_wrote(rows: list[tuple[str, float, float]]) -> None:
    ratios = [Ratio(case, value, spread) for case, value, spread in rows]
    text = "\n".join(["# Benchmarks", "", "## Held", "", *render_held(ratios), "", "## After", "| x | 1.00x | 0% |"])
    assert read_held(text) == {r.case: float(f"{r.value:.2f}") for r in ratios}


def test_a_benchmarks_file_without_the_table_holds_nothing() -> None:
    assert read_held("# Benchmarks\n\n| case | 1.00x | 0% |\n") == {}
    assert HELD_HEADING.startswith("###")


def test_the_ratio_is_of_the_medians_and_the_spread_of_the_turns() -> None:
    ratio = ratio_of_turns(CASE, [2.0, 3.0, 4.0], [1.0, 2.0, 2.0])
    assert ratio.value == pytest.approx(3.0 / 2.0)
    # Turn by turn: 2.0, 1.5, 2.0; range 0.5 over median 2.0.
    assert ratio.spread == pytest.approx(0.25)
    assert ratio_of_turns(CASE, [2.0], [1.0]).spread == 0.0
