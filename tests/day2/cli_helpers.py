"""Running `gpu-pool` in-process and as the installed console script, and writing its inputs."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from day2.cli import main
from tests.day2.k8s_objects import Obj, dump

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).parent / "gpu-pool"


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*argv: str, **kwargs: Any) -> Result:
    """`gpu-pool argv...` in-process; kwargs go to main (sleep, clock)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, **kwargs)
    return Result(code, out.getvalue(), err.getvalue())


def run_script(*argv: str, stdin: str | None = None) -> Result:
    """The installed console script (`uv run gpu-pool`), as a user runs it."""
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *argv], input=stdin, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )
    return Result(done.returncode, done.stdout, done.stderr)


def write_dump(path: Path, objects: list[Obj]) -> Path:
    path.write_text(json.dumps(dump(objects)), encoding="utf-8")
    return path


def kubeconfig(path: Path, server: str, context: str = "lab") -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "admin", "user": {"token": "not-a-real-token"}}],
                "contexts": [{"name": context, "context": {"cluster": "lab", "user": "admin"}}],
                "current-context": context,
            }
        ),
        encoding="utf-8",
    )
    return path
