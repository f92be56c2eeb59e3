"""How the answers print: stable JSON, plain tables off a terminal, the watch line, and the time-slicing note."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from day2.claims.compute import Claims, Holder, NodeClaims, Owner
from day2.claims.watch import stamp, watch
from day2.render import claims_json, cores, duration, print_claims, watch_line


def claims(*, allocatable: int = 4) -> Claims:
    holder = Holder(
        "team", "nb-0", "n1", 1, Decimal("0.6"), 3600, "Running", False, Owner("Notebook", "nb"), ("low-cpu",)
    )
    return Claims((NodeClaims("n1", allocatable, 1, allocatable - 1, None),), (holder,), ())


@pytest.mark.parametrize(("seconds", "text"), [(59, "59s"), (60, "1m"), (7200, "2h"), (105 * 86400 + 5, "105d")])
def test_ages_print_in_their_largest_whole_unit_like_kubectl(seconds: int, text: str) -> None:
    assert duration(seconds) == text


def test_cpu_is_printed_in_cores_to_the_millicore() -> None:
    assert cores(Decimal("0.6")) == 0.6 and cores(Decimal("1.2345")) == 1.234


def test_json_numbers_are_numbers() -> None:
    holder = claims_json(claims())["holders"][0]

    assert holder["cpuRequest"] == 0.6 and holder["ageSeconds"] == 3600 and holder["gpus"] == 1


def test_the_table_off_a_terminal_has_no_colour_codes_and_no_trailing_blanks() -> None:
    out = io.StringIO()
    print_claims(claims(), out)

    assert "\x1b[" not in out.getvalue()
    assert all(line == line.rstrip() for line in out.getvalue().splitlines())


def test_the_idle_caveat_is_printed_only_when_idle_was_checked_on_a_time_sliced_pool() -> None:
    def printed(idle_checked: bool, time_sliced: bool) -> str:
        out = io.StringIO()
        print_claims(claims(), out, idle_checked=idle_checked, time_sliced=time_sliced)
        return out.getvalue()

    assert "names only one of the pods sharing a time-sliced card" in printed(True, True)
    assert "time-sliced" not in printed(True, False) and "time-sliced" not in printed(False, True)


def test_the_watch_line_shows_free_per_node_and_the_total() -> None:
    assert watch_line(3, "2026-05-04T10:00:00Z", claims()) == (
        "[03] 2026-05-04T10:00:00Z free n1=3 total=3/4 terminating=0"
    )


def test_a_watch_stamp_is_utc_to_the_second() -> None:
    assert stamp(datetime(2026, 5, 4, 12, 0, 7, 900, tzinfo=UTC).astimezone()) == "2026-05-04T12:00:07Z"


def test_watch_samples_at_the_interval_until_interrupted_and_exits_0() -> None:
    out, pauses = io.StringIO(), []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 3:
            raise KeyboardInterrupt

    code = watch(
        lambda now: claims(), 10.0, out, as_json=False, sleep=sleep, clock=lambda: datetime(2026, 5, 4, tzinfo=UTC)
    )

    assert code == 0 and pauses == [10.0, 10.0, 10.0]
    assert [line[:4] for line in out.getvalue().splitlines()] == ["[01]", "[02]", "[03]"]
