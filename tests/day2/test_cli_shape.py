"""The CLI has one shape: a table of subcommands with one signature, and exit codes that are a contract."""

from __future__ import annotations

import argparse
import inspect
import io

import pytest

from day2.cli import SUBCOMMANDS, build_parser, main
from day2.command import ExitStatus, Io


def test_the_exit_codes_are_the_contract_scripts_and_alerts_read() -> None:
    assert {status.name: int(status) for status in ExitStatus} == {
        "SUCCESS": 0,
        "FINDING": 1,
        "ERROR": 2,
        "INTERRUPTED": 130,
    }


def test_every_subcommand_has_the_same_two_functions_and_a_unique_name() -> None:
    names = [subcommand.NAME for subcommand in SUBCOMMANDS]

    assert names == ["claims", "doctor", "node-check", "discover", "repair"]
    for subcommand in SUBCOMMANDS:
        assert len(inspect.signature(subcommand.add_arguments).parameters) == 1, subcommand.NAME
        assert list(inspect.signature(subcommand.run).parameters) == ["args", "io"], subcommand.NAME
        assert subcommand.HELP


def test_the_parser_offers_exactly_the_table_s_subcommands_with_their_help() -> None:
    parser = build_parser()
    (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]

    assert list(choices.choices) == [subcommand.NAME for subcommand in SUBCOMMANDS]
    assert [action.help for action in choices._choices_actions] == [subcommand.HELP for subcommand in SUBCOMMANDS]


def test_ctrl_c_in_any_subcommand_exits_130_through_the_one_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: argparse.Namespace, io_: Io) -> ExitStatus:
        raise KeyboardInterrupt

    for subcommand in SUBCOMMANDS:
        monkeypatch.setattr(subcommand, "run", interrupted)
    for subcommand in SUBCOMMANDS:
        err = io.StringIO()
        argv = [subcommand.NAME, *(["rke2-worker-dc1-gpu-a", "--stack", "prod"] if subcommand.NAME == "repair" else [])]

        code = main(argv, out=io.StringIO(), err=err)

        assert code == ExitStatus.INTERRUPTED and code == 130
        assert err.getvalue() == ""
