"""What a new user waits for: `make preview` and `make test` on a fresh clone with empty caches, `make test` on a
fresh clone whose caches are warm (CI's case once its cache is filled: the issue's 60 s target), and (on request)
the e2e tier's cold build of kube-apiserver, etcd, kubectl, helm and the Kyverno CLI.

Each runs in a throwaway clone of the current commit; with empty caches, its own uv cache (UV_CACHE_DIR), so every
package is downloaded, installed and compiled as on a new machine, and its own mypy cache (MYPY_CACHE_DIR, which
`make lint` otherwise keeps beside uv's, shared by every clone). A fresh clone has no venv and no bytecode. The e2e
build gets an empty Go build and module cache too; it takes minutes and gigabytes, so it only runs with
`--e2e-cold`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.settings import ROOT, BenchError, without_make_variables


@dataclass(frozen=True)
class ColdRun:
    label: str
    command: str
    wall: float
    exit_code: int
    # What the run left on disk in caches and tools (bytes), where measured.
    disk_bytes: int | None = None


def _disk_use(*paths: Path) -> int:
    """Bytes under `paths` (files only, links not followed)."""
    total = 0
    for path in paths:
        for root, _, files in os.walk(path):
            for name in files:
                total += (Path(root) / name).lstat().st_size
    return total


def _clone(target: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)


def _environment(work: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in without_make_variables(dict(os.environ)).items()
        if not key.startswith(("UV_", "VIRTUAL_ENV"))
    }
    env["UV_CACHE_DIR"] = str(work / "uv-cache")
    env["MYPY_CACHE_DIR"] = str(work / "mypy-cache")
    return env | extra


WARM_CACHES = ("UV_CACHE_DIR", "MYPY_CACHE_DIR")
# The row the 60 s target is read from (benchmarks/report.py).
WARM_TEST = "cold `make test`, package and mypy caches warm"


def _uv_cache(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """This machine's own uv and mypy caches, where `make` on this checkout filled them (unset: make's defaults)."""
    return {name: environ[name] for name in WARM_CACHES if environ.get(name)}


def _timed(label: str, command: list[str], cwd: Path, env: dict[str, str]) -> ColdRun:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        said = result.stdout + result.stderr
        # pytest's failure report, not only the list of skips that follows it.
        start = said.find("= FAILURES =")
        shown = said[start : start + 6000] if start >= 0 else said[-3000:]
        raise BenchError(f"{label} failed (exit {result.returncode}):\n{shown}")
    return ColdRun(label, " ".join(command), wall, result.returncode)


def cold_setup(log: Callable[[str], None], *, e2e: bool = False) -> list[ColdRun]:
    make = shutil.which("make")
    if make is None:
        raise BenchError("make is not on PATH")
    runs: list[ColdRun] = []
    from refdata.fetch import DEFAULT_DEST, is_complete

    # The clone has no upstream data of its own: it reads this checkout's (every contract test runs).
    upstream = os.environ.get("GPU_POOL_UPSTREAM_DIR") or (
        str(DEFAULT_DEST) if is_complete(DEFAULT_DEST) else str(ROOT.parent / "shared" / "upstream")
    )
    variants = (
        ("cold `make preview`", "preview", True),
        ("cold `make test`", "test", True),
        (WARM_TEST, "test", False),
    )
    for label, target, empty_cache in variants:
        with tempfile.TemporaryDirectory(prefix="gpu-pool-cold-") as temp:
            work = Path(temp)
            clone = work / "gpu-pool"
            _clone(clone)
            log(f"timing {label} in a fresh clone")
            env = _environment(work, {"GPU_POOL_UPSTREAM_DIR": upstream})
            if not empty_cache:
                env = {k: v for k, v in env.items() if k not in WARM_CACHES} | _uv_cache(os.environ)
            runs.append(_timed(label, [make, "-s", target], clone, env))
    if e2e:
        with tempfile.TemporaryDirectory(prefix="gpu-pool-cold-e2e-") as temp:
            work = Path(temp)
            clone = work / "gpu-pool"
            _clone(clone)
            log("timing the e2e tier's cold build (empty Go build and module caches: several minutes)")
            env = _environment(work, {"GOCACHE": str(work / "go-build"), "GOMODCACHE": str(work / "go-mod")})
            built = _timed("cold `make e2e-tools`", [make, "-s", "e2e-tools"], clone, env)
            disk = _disk_use(work / "go-build", work / "go-mod", clone / ".tools" / "e2e")
            runs.append(ColdRun(built.label, built.command, built.wall, built.exit_code, disk))
            # The module cache is read-only by design; make it removable.
            subprocess.run(["chmod", "-R", "u+w", str(work / "go-mod")], check=False)
    return runs
