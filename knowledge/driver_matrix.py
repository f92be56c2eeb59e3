"""Which NVIDIA data-center drivers a GPU Operator chart version supports, and what to pin instead.

Source of the data: NVIDIA GPU Operator v26.3.x documentation, "Platform support / GPU Operator
component matrix", as recorded in DESIGN.md section 3 ("Driver compatibility"); for v26.7.x, the same matrix in
NVIDIA/cloud-native-docs `gpu-operator/life-cycle-policy.rst` lines 93-99 at 52dcb7b8d956 (2026-08-21), which
also gives the life cycle (lines 55-62: 26.7.x Supported, 26.3.x Deprecated). The table is our own data, not read
from the chart: the chart's values.yaml only names one default driver (v26.7.0: 595.91.07, values.yaml line 154).

The 26.7 patch releases: v26.7.1 exists (NVIDIA/gpu-operator release v26.7.1 at 8587e97f, out by 2026-10-02),
but the newest snapshots of both sources above stop at 2026-08-21 (cloud-native-docs 52dcb7b8: release notes up
to 26.7.0; gpu-operator a22dbf67: tags up to v26.7.0), so no driver list for it can be cited. Until one can, a
v26.7.1 pin is refused as unknown, naming the known versions and allowUnsupportedDriver: guessing that a patch
release keeps 26.7.0's list is what this table exists to avoid.

Why the guard exists: the article pinned 570.133.20 on chart v26.3.2. That driver is not on the
chart's list and sits in the R570 range with the NVML bug that leaves GPU pods Pending on mixed
MIG/full-GPU nodes (gpu-operator#1361, fixed from 570.172.08). A pin the chart was never tested
with fails on the node, minutes into a rollout; refusing it at preview costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, NamedTuple

# GPU Operator v26.3.x component matrix. 580.173.02 is the recommended driver, 580.126.20 the
# chart's default `driver.version`, 570.211.01 the only R570 the release supports.
_V26_3_DRIVERS: Final[tuple[str, ...]] = (
    "595.71.05",
    "595.58.03",
    "590.48.01",
    "580.173.02",
    "580.167.08",
    "580.159.04",
    "580.159.03",
    "580.126.20",
    "570.211.01",
    "535.309.01",
    "535.288.01",
)

# GPU Operator v26.7.0 component matrix: 595.91.07 recommended and default, 580.173.02, 535.309.01. No R570 any
# more: a stack on 570.211.01 moves to 580.173.02 (or R595) with the chart bump.
_V26_7_DRIVERS: Final[tuple[str, ...]] = ("595.91.07", "580.173.02", "535.309.01")

SUPPORTED_DRIVERS: Final[Mapping[str, tuple[str, ...]]] = {
    "v26.3.0": _V26_3_DRIVERS,
    "v26.3.1": _V26_3_DRIVERS,
    "v26.3.2": _V26_3_DRIVERS,
    "v26.3.3": _V26_3_DRIVERS,
    "v26.7.0": _V26_7_DRIVERS,
}

RECOMMENDED_DRIVERS: Final[Mapping[str, str]] = {
    "v26.3.0": "580.173.02",
    "v26.3.1": "580.173.02",
    "v26.3.2": "580.173.02",
    "v26.3.3": "580.173.02",
    "v26.7.0": "595.91.07",
}

# Upstream's life cycle (life-cycle-policy.rst, lines 55-62 at 52dcb7b8d956): the previous major line gets critical
# fixes only; anything older is out of support. Keyed by the YY.MM line of a chart version.
SUPPORTED_LINE: Final = "26.7"
DEPRECATED_LINES: Final[tuple[str, ...]] = ("26.3",)


class KnownDriverIssue(NamedTuple):
    """A bug that affects every driver of `branch` older than `fixed_in`."""

    branch: int
    fixed_in: str
    issue: str


KNOWN_DRIVER_ISSUES: Final[tuple[KnownDriverIssue, ...]] = (
    KnownDriverIssue(
        branch=570,
        fixed_in="570.172.08",
        issue=(
            "NVML bug that leaves GPU pods Pending on nodes mixing MIG and full GPUs "
            "(gpu-operator#1361, fixed from 570.172.08)"
        ),
    ),
)

_DRIVER_VERSION = re.compile(r"^\d+(?:\.\d+){0,2}$")


def _version_tuple(version: str) -> tuple[int, ...] | None:
    if not _DRIVER_VERSION.match(version):
        return None
    return tuple(int(part) for part in version.split("."))


def _normalise_chart(chart_version: str) -> str:
    return chart_version if chart_version.startswith("v") else f"v{chart_version}"


def is_branch(driver_version: str) -> bool:
    """`580` is a driver branch (what precompiled images are tagged with); `580.173.02` is a release."""
    return driver_version.isdigit()


def supported_drivers(chart_version: str) -> tuple[str, ...] | None:
    """The drivers NVIDIA supports with this chart, newest first; None for a chart not in the table."""
    return SUPPORTED_DRIVERS.get(_normalise_chart(chart_version))


def recommended_driver(chart_version: str) -> str | None:
    """NVIDIA's recommended driver for this chart, None for a chart not in the table."""
    return RECOMMENDED_DRIVERS.get(_normalise_chart(chart_version))


def nearest_supported(chart_version: str, driver_version: str) -> str | None:
    """The supported driver of the same branch (major number) closest to `driver_version`.

    Distance is measured on the version number line (580.150.00 is nearer 580.159.03 than
    580.126.20); when two candidates are equally near, the newer one wins (it has more fixes).
    A bare branch ("580") gets the newest driver of that branch. None when the chart is unknown,
    the version is not a driver version, or the chart supports nothing from that branch.
    """
    drivers = supported_drivers(chart_version)
    wanted = _version_tuple(driver_version)
    if drivers is None or wanted is None:
        return None
    candidates = [
        (parsed, driver)
        for driver in drivers
        if (parsed := _version_tuple(driver)) is not None and parsed[0] == wanted[0]
    ]
    if not candidates:
        return None
    if len(wanted) == 1:
        return max(candidates)[1]
    width = max(len(wanted), *(len(parsed) for parsed, _ in candidates))

    def position(parsed: tuple[int, ...]) -> int:
        # Components never exceed 999 (NVIDIA numbers minor 0-999, patch 00-99), so base 1000 keeps order.
        padded = parsed + (0,) * (width - len(parsed))
        value = 0
        for part in padded:
            value = value * 1000 + part
        return value

    target = position(wanted)
    best = min(candidates, key=lambda item: (abs(position(item[0]) - target), tuple(-p for p in item[0])))
    return best[1]


def _known_issue(driver_version: str) -> str | None:
    parsed = _version_tuple(driver_version)
    if parsed is None or len(parsed) == 1:
        return None
    for known in KNOWN_DRIVER_ISSUES:
        fixed = _version_tuple(known.fixed_in)
        if fixed is not None and parsed[0] == known.branch and parsed < fixed:
            return known.issue
    return None


def chart_line(chart_version: str) -> str:
    """`v26.3.2` -> `26.3`: the major line the life cycle speaks of."""
    return ".".join(_normalise_chart(chart_version).removeprefix("v").split(".")[:2])


def chart_deprecation(chart_version: str) -> str | None:
    """A sentence saying the chart's line is deprecated upstream, None for the supported line."""
    line = chart_line(chart_version)
    if line not in DEPRECATED_LINES:
        return None
    return (
        f"GPU Operator {line}.x is deprecated upstream (critical fixes only); {SUPPORTED_LINE}.x is the supported "
        f"line: move to chartVersion v{SUPPORTED_LINE}.0 with `make diff` first (docs/diff.md, the operator upgrade)"
    )


def driver_problem(chart_version: str, driver_version: str) -> str | None:
    """A human sentence saying why this driver must not be pinned with this chart; None when it is fine."""
    drivers = supported_drivers(chart_version)
    if drivers is None:
        known = ", ".join(SUPPORTED_DRIVERS)
        return (
            f"GPU Operator {chart_version} is not in gpu-pool's driver compatibility table "
            f"(known chart versions: {known}), so driver {driver_version} cannot be checked against it"
        )
    parsed = _version_tuple(driver_version)
    if parsed is None:
        return f"'{driver_version}' is not an NVIDIA driver version (expected e.g. 580.173.02, or a branch like 580)"
    listed = ", ".join(drivers)
    if is_branch(driver_version):
        if any(_version_tuple(d) is not None and d.split(".")[0] == driver_version for d in drivers):
            return None
        return (
            f"driver branch R{driver_version} is not supported by GPU Operator {chart_version}; "
            f"supported drivers: {listed}"
        )
    if driver_version in drivers:
        return None
    message = f"driver {driver_version} is not supported by GPU Operator {chart_version}"
    issue = _known_issue(driver_version)
    if issue:
        message += f" and has the {issue}"
    message += f"; supported drivers: {listed}"
    nearest = nearest_supported(chart_version, driver_version)
    if nearest is not None:
        message += f"; the nearest supported R{parsed[0]} driver is {nearest}"
    else:
        recommended = recommended_driver(chart_version)
        message += f"; no R{parsed[0]} driver is supported, NVIDIA recommends {recommended}"
    return message
