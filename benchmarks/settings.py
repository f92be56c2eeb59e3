"""Paths, defaults and targets every part of `make bench` shares."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE_PROGRAM = Path(__file__).resolve().parent / "baseline_program.py"
OUTPUT = ROOT / "BENCHMARKS.md"
SDK_MODULES_ENV = "GPU_POOL_BENCH_SDK_MODULES"
# The SDKs the baseline may import: Pulumi and its provider SDKs, and pydantic (the config models' engine).
SDK_MODULE = re.compile(r"^(pulumi|pydantic)(_[a-z0-9]+)*(\.|$)")
SDK_DISTRIBUTIONS = ("pulumi", "pulumi-kubernetes", "pulumi-proxmoxve", "pulumi-command", "pydantic")
DEFAULT_DOMAINS = (3, 30, 100)
# The scaled real-engine case (issue 42): prod against its floors at these sizes.
ENGINE_SCALE_DOMAINS = (30, 100)
BYTECODE_CACHED = "cached"
BYTECODE_AS_CONFIGURED = "as configured"
MIN_RUNS = 5

# The targets, measured on the project's 2-core machine.
MAX_PROD_OVER_BASELINE = 2.0
MAX_LARGEST_OVER_SMALLEST = 15.0
MAX_LARGEST_RSS_MB = 400.0
MAX_TEST_SUITE_S = 60.0
MAX_COLD_PREVIEW_S = 20.0
MAX_ENGINE_OVER_FLOOR = 1.5


ENV_LINE = re.compile(r"^([A-Z_][A-Z0-9_]*)=(\S+)$")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines without spaces, `#` comments and blank lines skipped: e2e/preview.env, which the Makefile
    pastes in front of `pulumi preview` as it is, so any other line is refused here."""
    settings: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = ENV_LINE.match(line)
        if match is None:
            raise BenchError(f"{path}: {line!r} is not a KEY=VALUE line (no spaces), as the Makefile needs")
        settings[match[1]] = match[2]
    return settings


# What `make real-preview` sets for a preview (e2e/preview.env): the real-engine row measures both ways.
PREVIEW_ENV = read_env_file(ROOT / "e2e" / "preview.env")


class BenchError(RuntimeError):
    pass


# What make itself puts in a recipe's environment: the flags and command-line variables it passes to a sub-make
# (MAKEFLAGS, MFLAGS, MAKEOVERRIDES), the recursion depth, and whether its output is a terminal.
MAKE_OWN_VARIABLES = frozenset({"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR"})
# A parameter of the project's Makefile (`ARGS ?=`, `STACK ?= prod`): what a caller sets for its own target.
MAKEFILE_PARAMETER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\?=", re.MULTILINE)


def makefile_parameters(makefile: Path = ROOT / "Makefile") -> frozenset[str]:
    """The variables the project's Makefile takes from its caller (`NAME ?= default`, not exported ones: an
    `export NAME ?=` is meant for every process below it)."""
    return frozenset(MAKEFILE_PARAMETER.findall(makefile.read_text()))


def without_make_variables(environ: dict[str, str]) -> dict[str, str]:
    """The environment for a `make` (or anything) a benchmark or a test starts: without the variables of the make
    that started it. `make e2e ARGS=--durations=40` exports ARGS to its recipes and lists it in MAKEFLAGS; a child
    `make diff` would read it from either and pass `--durations=40` to the diff. Dropped: make's own variables and
    every parameter of the project's Makefile (ARGS, STACK, OUT, ...), from the command line or the environment.
    Any other command-line variable stays, as an environment variable: a child make's own assignments win over it,
    and what the caller meant for the processes below (`make e2e CI=1`) still reaches them."""
    dropped = MAKE_OWN_VARIABLES | makefile_parameters()
    return {key: value for key, value in environ.items() if key not in dropped}
