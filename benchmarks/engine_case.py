"""The real-engine row of `make bench`: `pulumi preview` of prod against the engine's own floor, and where the
difference goes.

Both run under the engine `make engine-tools` picked (`.tools/engine/selected`: yours or the source build), each in
a temp project with its own PULUMI_HOME and file backend, the stack initialised and its secrets set once, then
previewed in turns (prod, floor, prod, floor, ...) so that load from other work spreads over both, each as
`make real-preview` runs a preview (e2e/preview.env) and prod and the floor again with the engine's defaults:

- **prod**: this program, linked into the project as the e2e tier links it, with prod's stack file, the chart on
  disk (`gpuOperator.chart`: the v26.7.0 chart packaged as NVIDIA publishes it, from the upstream data) and the
  preflights off (GPU_POOL_OFFLINE=1, as `make preview`); the cluster is a kubeconfig naming a loopback port
  nothing listens on, so the kubernetes provider previews without one, as on a laptop away from the lab.
- **floor**: a program of this project's runtime that registers the same three providers with the same
  settings and nothing else: what any preview with these providers costs (the CLI, the language host and its uv
  environment check, the Python SDKs' imports, three plugins started and configured).

Then one more run of each with PULUMI_DEBUG_GRPC, the engine's log of every gRPC call it makes (method, plugin,
duration: sdk/go/pulumi-internal/rpcdebug), for the breakdown: how long the language host's `Run` (the program)
took, and each provider's calls by method.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks.settings import PREVIEW_ENV, ROOT, SDK_MODULES_ENV, BenchError

PROGRAM_ENTRIES = ("Pulumi.yaml", "__main__.py", "pyproject.toml", "uv.lock", "README.md", "components", "config",
                   "knowledge", "node", "offline", "day2")  # fmt: skip
PASSPHRASE = "gpu-pool bench passphrase"
# Values in the shapes the program checks (config/secret_checks.py); never a user's.
SECRETS = {
    "gpu-pool:rke2Token": "K10" + "b0b0" * 16 + "::server:bench-join-password",
    "gpu-pool:proxmoxApiToken": "pulumi@pve!gpu-pool=00000000-b0b0-4000-8000-0000000000b0",
}
FLOOR_PROGRAM = '''"""The floor: the three providers prod uses, with prod's settings, and nothing else
(with GPU_POOL_BENCH_SDK_MODULES, after importing the SDK modules prod loads, as the offline baseline does)."""
import importlib
import os

import pulumi_command

from components.shared.providers import build_kubernetes_provider, build_proxmox_provider
from components.stack_check import validate_stack
from config.loader import load_config

for module in filter(None, os.environ.get("GPU_POOL_BENCH_SDK_MODULES", "").splitlines()):
    importlib.import_module(module)
loaded = load_config(validate_stack)
build_proxmox_provider(loaded)
build_kubernetes_provider(loaded)
# prod's commands use the default command provider: the same plugin, started and configured the same way.
pulumi_command.Provider("command")
'''
# An address nothing listens on: the kubernetes provider finds the cluster unreachable and previews without it.
UNREACHABLE = "https://127.0.0.1:9"


@dataclass
class EngineRow:
    # Previews as `make real-preview` runs them (e2e/preview.env: no per-step snapshot a preview throws away).
    prod: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    # The floor after importing the SDK modules prod loads: what prod costs above it is the program and its resources.
    floor_sdk: list[float] = field(default_factory=list)
    # The same two with the engine's defaults: a bare `pulumi preview`.
    prod_defaults: list[float] = field(default_factory=list)
    floor_defaults: list[float] = field(default_factory=list)
    steps: int = 0
    engine: str = ""
    # One PULUMI_DEBUG_GRPC run of each, for the breakdown.
    traces: dict[str, Trace] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return statistics.median(self.prod) / statistics.median(self.floor)

    @property
    def ratio_defaults(self) -> float:
        return statistics.median(self.prod_defaults) / statistics.median(self.floor_defaults)


def upstream_chart(work: Path, log: Callable[[str], None]) -> Path | None:
    """The v26.7.0 chart as NVIDIA publishes it (`helm package --version --app-version` of the upstream data's tree),
    or None (with the reason logged) when the data or helm is missing."""
    from refdata.fetch import DEFAULT_DEST, is_complete

    data = os.environ.get("GPU_POOL_UPSTREAM_DIR") or (str(DEFAULT_DEST) if is_complete(DEFAULT_DEST) else "")
    helm = ROOT / ".tools" / "e2e" / "bin" / "helm"
    if not data or not helm.exists():
        log("the real-engine row needs the upstream data (make upstream) and helm (make e2e-tools): left out")
        return None
    tree = work / "chart-tree" / "gpu-operator"
    shutil.copytree(
        Path(data) / "gpu-operator" / "v26.7.0" / "chart", tree, ignore=shutil.ignore_patterns("SHA256SUMS")
    )
    stamp = ["--version", "v26.7.0", "--app-version", "v26.7.0"]
    subprocess.run([str(helm), "package", *stamp, str(tree), "-d", str(work)], check=True, capture_output=True)
    return work / "gpu-operator-v26.7.0.tgz"


def selected_engine() -> Path | None:
    chosen = os.environ.get("ENGINE_BIN")
    selected = ROOT / ".tools" / "engine" / "selected"
    if not chosen and selected.is_file():
        chosen = selected.read_text().strip()
    path = Path(chosen) if chosen else ROOT / ".tools" / "engine" / "bin"
    return path if (path / "pulumi").exists() else None


def _kubeconfig(path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": UNREACHABLE, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )
    return path


class Project:
    def __init__(
        self,
        work: Path,
        name: str,
        engine: Path,
        config: dict[str, Any],
        floor: bool,
        env: dict[str, str] | None = None,
        *,
        program: str | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        """`program`: the text of the project's `__main__.py` in place of this program's (the floor's when
        `floor`); `files`: more files written into the project (a floor's list of registrations)."""
        self.extra_env = env or {}
        self.dir = work / name / "project"
        self.state = work / name / "state"
        self.home = work / name / "home"
        self.engine = engine
        for d in (self.dir, self.state, self.home):
            d.mkdir(parents=True)
        for entry in PROGRAM_ENTRIES:
            if entry == "__main__.py" and (floor or program is not None):
                (self.dir / entry).write_text(program if program is not None else FLOOR_PROGRAM)
            else:
                (self.dir / entry).symlink_to(ROOT / entry)
        for name_, text in (files or {}).items():
            (self.dir / name_).write_text(text)
        (self.dir / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
        self.run("stack", "init", "--secrets-provider", "passphrase")
        for key, value in SECRETS.items():
            self.run("config", "set", "--secret", key, stdin=value)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        environ = {
            # Bytecode written and read as on a normal machine, for every case alike (prod's own program turns it
            # back on, the floors would not: docs/engine.md).
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PULUMI_", "GPU_POOL_", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"))
        }
        environ.update(
            {
                "PATH": os.pathsep.join([str(self.engine), str(ROOT / ".tools" / "bin"), environ.get("PATH", "")]),
                "PULUMI_HOME": str(self.home),
                "PULUMI_BACKEND_URL": f"file://{self.state}",
                "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
                "PULUMI_SKIP_UPDATE_CHECK": "true",
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
                "GPU_POOL_OFFLINE": "1",
                "UV_OFFLINE": "1",
                "UV_NO_DEFAULT_GROUPS": "1",
                "UV_PYTHON_DOWNLOADS": "never",
                "NO_COLOR": "1",
            }
        )
        return environ | self.extra_env | (extra or {})

    def run(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["pulumi", *args, "--stack", "bench", "--non-interactive"],
            cwd=self.dir,
            env=self.env(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            raise BenchError(f"pulumi {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def preview(self, env: dict[str, str] | None = None) -> float:
        start = time.perf_counter()
        self.run("preview", env=env)
        return time.perf_counter() - start


@dataclass
class Trace:
    """One preview as the engine's gRPC debug log shows it (sdk/go/pulumi-internal/rpcdebug: client calls carry
    their duration; every entry a timestamp)."""

    wall: float
    before_run: float  # the CLI's own start: the language host asked what it needs, plugins found
    run: float  # the language host's Run: the program, from its uv environment check to its last registration
    to_first_plugin: float  # Run's start to the first provider's handshake: starting Python, imports, config
    # The last provider call's answer to Run's end: the program's exit (its process ending, the language host's
    # answer), with nothing else left to do.
    after_last_call: float
    rpc: dict[tuple[str, str], tuple[int, float]]  # (plugin, method) -> calls, seconds


def _stamp(text: str) -> datetime | None:
    if text.startswith("0001"):  # server-side entries are not timed
        return None
    return datetime.fromisoformat(text[:26].rstrip("Z"))


def read_trace(log: Path, wall: float) -> Trace:
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    rpc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    first = run_start = run_end = first_plugin = last_call = None
    for entry in entries:
        at = _stamp(str(entry.get("timestamp", "0001")))
        method = str(entry.get("method", "?")).rsplit("/", 1)[-1]
        metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        if at is not None:
            first = at if first is None else min(first, at)
        if method == "Run" and at is not None:
            if entry.get("progress") == "request_started":
                run_start = at
            else:
                run_end = at
        if metadata.get("kind") == "resource" and method == "Handshake" and at is not None:
            first_plugin = at if first_plugin is None else min(first_plugin, at)
        duration = entry.get("duration")
        provider_answer = metadata.get("kind") == "resource" and entry.get("progress") == "response_completed"
        # Cancel: the engine ending each provider after Run.
        if provider_answer and metadata.get("mode") == "client" and method != "Cancel" and at is not None:
            last_call = at if last_call is None else max(last_call, at)
        if entry.get("progress") == "response_completed" and duration and metadata.get("mode") == "client":
            who = str(metadata.get("name") or f"language host ({metadata.get('runtime', '?')})")
            rpc[(who, method)][0] += 1
            rpc[(who, method)][1] += duration / 1e9
    if first is None or run_start is None or run_end is None:
        raise BenchError(f"{log}: no Run of the language host in the engine's gRPC log")
    return Trace(
        wall=wall,
        before_run=(run_start - first).total_seconds(),
        run=(run_end - run_start).total_seconds(),
        to_first_plugin=((first_plugin or run_end) - run_start).total_seconds(),
        after_last_call=(run_end - (last_call or run_end)).total_seconds(),
        rpc={k: (int(n), float(t)) for k, (n, t) in rpc.items()},
    )


def measure_engine(work: Path, runs: int, sdk_modules: list[str], log: Callable[[str], None]) -> EngineRow | None:
    engine = selected_engine()
    if engine is None:
        log("no Pulumi engine built or selected (make engine-tools): the real-engine row is left out")
        return None
    chart = upstream_chart(work, log)
    if chart is None:
        return None
    prod_config = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    kubeconfig = _kubeconfig(work / "kubeconfig")
    prod_config["gpu-pool:kubernetes"] = {"kubeconfig": str(kubeconfig), "context": "bench"}
    prod_config["gpu-pool:gpuOperator"] = {**prod_config["gpu-pool:gpuOperator"], "chart": str(chart)}
    log("setting up the real-engine stacks (prod and the floor)")
    projects = {
        "prod": Project(work, "prod", engine, prod_config, floor=False),
        "floor": Project(work, "floor", engine, prod_config, floor=True),
        "floor_sdk": Project(
            work, "floor_sdk", engine, prod_config, floor=True, env={SDK_MODULES_ENV: "\n".join(sdk_modules)}
        ),
    }
    row = EngineRow(
        engine=subprocess.run([str(engine / "pulumi"), "version"], capture_output=True, text=True).stdout.strip()
    )
    for project in projects.values():  # warm-up: the language host's first uv sync, bytecode
        project.preview()
    for turn in range(runs):
        for name, project in projects.items():
            getattr(row, name).append(project.preview(PREVIEW_ENV))
        for name in ("prod", "floor"):
            getattr(row, f"{name}_defaults").append(projects[name].preview())
        log(
            f"engine run {turn + 1}/{runs}: prod {row.prod[-1]:.2f} s, floor {row.floor[-1]:.2f} s, "
            f"floor with prod's SDK modules {row.floor_sdk[-1]:.2f} s; with the engine's defaults prod "
            f"{row.prod_defaults[-1]:.2f} s, floor {row.floor_defaults[-1]:.2f} s"
        )
    for name, project in projects.items():
        grpc = work / f"{name}-grpc.json"
        wall = project.preview({**PREVIEW_ENV, "PULUMI_DEBUG_GRPC": str(grpc)})
        row.traces[name] = read_trace(grpc, wall)
    steps = json.loads(projects["prod"].run("preview", "--json")).get("steps", [])
    row.steps = len(steps)
    return row
