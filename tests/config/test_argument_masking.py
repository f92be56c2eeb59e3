"""No command line's error repeats a credential (issue 50): each CLI's parser is config/arguments.py's, whose
messages mask every value of a secret flag (config/secrets.py SECRET_FLAGS), however the flag is spelt or misplaced,
and every URL's login."""

from __future__ import annotations

import io
import string
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.arguments import masked, secret_values
from config.plain_credentials import has_userinfo, split_userinfo, with_userinfo, without_userinfo
from config.secrets import CREDENTIALS, SECRET_FLAGS
from day2 import cli
from day2.node_check import command as node_check
from offline import chart_pull, diff, preview

CANARY = "canary-0d4e-not-to-be-seen"


def _gpu_pool(argv: list[str]) -> str:
    err = io.StringIO()
    cli.main(argv, out=io.StringIO(), err=err)
    return err.getvalue()


def _node_check(argv: list[str]) -> str:
    err = io.StringIO()
    node_check.main(argv, out=io.StringIO(), err=err)
    return err.getvalue()


def _argparse_main(main: Callable[[list[str]], int]) -> Callable[[list[str]], str]:
    def run(argv: list[str]) -> str:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit):
            main(argv)
        return out.getvalue() + err.getvalue()

    return run


CLIS: dict[str, Callable[[list[str]], str]] = {
    "gpu-pool claims": lambda argv: _gpu_pool(["claims", *argv]),
    "gpu-pool doctor": lambda argv: _gpu_pool(["doctor", *argv]),
    "gpu-pool discover": lambda argv: _gpu_pool(["discover", *argv]),
    "gpu-pool repair": lambda argv: _gpu_pool(["repair", "--stack", "x", *argv]),
    "gpu-pool node-check": _node_check,
    "offline preview": _argparse_main(preview.main),
    "offline diff": _argparse_main(lambda argv: diff.main(["--before", "x", *argv])),
    "make chart": _argparse_main(chart_pull.main),
}
# Each way a credential reaches a parser that does not take it, or takes it badly.
MISTAKES = {
    "an unrecognized --secret": ["--secret", f"rke2Token={CANARY}"],
    "an unrecognized --secret=": [f"--secret=rke2Token={CANARY}"],
    "an abbreviated flag": ["--prometheus-pass", CANARY],
    "a --prometheus-password=": [f"--prometheus-password={CANARY}"],
    "a --prometheus-token beside a stray argument": ["--prometheus-token", CANARY, "stray"],
    "a URL's login": [f"http://admin:{CANARY}@prometheus:9090"],
    "a URL's login with a # in the password": [f"http://admin:pw#{CANARY}@proxy:3128"],
}


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("cli_name", CLIS)
def test_a_credential_given_to_a_command_line_is_never_in_its_error(cli_name: str, mistake: str) -> None:
    # A flag no parser takes beside it: every command refuses the line, whether or not it takes the credential.
    printed = CLIS[cli_name]([*MISTAKES[mistake], "--no-such-flag"])

    assert printed, "the mistake was accepted: no error to check"
    assert CANARY not in printed


def test_the_masked_error_still_names_the_flag_and_says_the_value_is_not_shown() -> None:
    printed = _gpu_pool(["claims", "--secret", f"rke2Token={CANARY}"])

    assert "unrecognized arguments: --secret <value not shown>" in printed


def test_every_flag_that_carries_a_credential_is_in_the_list() -> None:
    assert set(SECRET_FLAGS) == {"--secret", "--prometheus-password", "--prometheus-token"}
    assert all(row.given for row in CREDENTIALS)


@settings(max_examples=200, deadline=None)
@given(
    # A raw `%` starts a percent-escape in a URL's login; the round trip through with_userinfo takes it as written.
    password=st.text(alphabet=string.ascii_letters + string.digits + "#?/@:!$&'()*+,;=-._~", min_size=1),
    raw=st.text(min_size=1).filter(lambda text: "\n" not in text),
    user=st.text(alphabet=string.ascii_letters + string.digits + "-_.", min_size=1),
)
def test_a_login_in_any_url_is_stripped_from_a_message_and_split_back_whole(password: str, user: str, raw: str) -> None:
    url = f"http://{user}:{password}@proxy.lab:3128"
    message = f"gpu-pool:proxy.https: {url} has a port that is not a number"

    assert (
        without_userinfo(message) == "gpu-pool:proxy.https: http://***@proxy.lab:3128 has a port that is not a number"
    )
    assert has_userinfo(url)
    assert split_userinfo(url) == ("http://proxy.lab:3128", f"{user}:{password}")
    assert split_userinfo(with_userinfo("http://proxy.lab:3128", f"{user}:{raw}")) == (
        "http://proxy.lab:3128",
        f"{user}:{raw}",
    )


@settings(max_examples=200, deadline=None)
@given(text=st.text(), flag=st.sampled_from(SECRET_FLAGS))
def test_any_value_of_a_secret_flag_is_masked_in_a_message_that_quotes_the_line(text: str, flag: str) -> None:
    value = f"canary{text}"
    argv = ["claims", flag, value, "--other"]

    assert secret_values(argv) == [value]
    assert value not in masked(f"unrecognized arguments: {' '.join(argv)}", argv)


def test_a_parsers_own_option_that_only_begins_like_a_secret_flag_keeps_its_value_in_the_message() -> None:
    printed = _gpu_pool(["claims", "--prometheus", "http://prometheus.lab:9090", "--no-such-flag"])

    assert "unrecognized arguments: --no-such-flag" in printed
    assert secret_values(["--prometheus", "http://p:9090"], own={"--prometheus"}) == []
    assert secret_values(["--prometheus", "http://p:9090"]) == ["http://p:9090"]  # a stranger's prefix: masked
