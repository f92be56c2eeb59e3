"""The real Pulumi CLI on this program, pointed at the e2e API server and the Proxmox stand-in.

A file backend and passphrase secrets in a temp dir, PULUMI_HOME and HOME there too (the bpg provider writes
the stand-in's host key to ~/.ssh/known_hosts, and each run's sshd has a new one), and the stack file given
with `--config-file`, so nothing is written in the repository.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.gpu_operator import GpuOperatorConfig
from offline.runner import PROJECT, ROOT_DIR, read_stack_file
from tests.e2e.proxmox_standin import ProxmoxStandIn

ENGINE_BIN = ROOT_DIR / ".tools" / "engine" / "bin"
STACK = "e2e-up"
PASSPHRASE = "e2e-passphrase-not-a-secret"
RKE2_TOKEN = "K10e2e-join-token-0f9d8c7b6a5::server:e2e-rke2-secret-5e4d3c2b1a"
API_TOKEN_SECRET = "5d1e9f0a-e2e0-4b1c-9a8d-api-token-secret"
API_TOKEN = f"pulumi@pve!gpu-pool={API_TOKEN_SECRET}"
SECRETS = {"rke2Token": RKE2_TOKEN, "proxmoxApiToken": API_TOKEN}
# The offline chart in ../shared/upstream: a helm.v3.Release fetches its chart even in a preview.
LOCAL_CHART = Path("gpu-operator") / "v26.3.2" / "chart"
# How often the node steps look (the steps' default is 10 s: made for VMs that take minutes to boot).
POLL_SECONDS = "1"
TIMEOUT_SECONDS = 540


class EngineError(AssertionError):
    pass


def stack_config(prod: dict[str, Any], pve: ProxmoxStandIn, kubeconfig: Path, chart: Path | None) -> dict[str, Any]:
    """prod as committed, its Proxmox side pointed at the stand-in and its cluster at the e2e API server."""
    config = copy.deepcopy(prod)
    key = f"{PROJECT}:"
    nodes = sorted({d["proxmoxNode"] for d in config[key + "failureDomains"]} | {"pve-dc4", "pve-dc9"})
    config[key + "proxmox"] |= {
        "endpoint": pve.endpoint,
        "insecure": True,
        "ssh": {
            "username": os.environ.get("USER") or "root",
            "agent": True,
            "nodeAddresses": {node: "127.0.0.1" for node in nodes},
            "port": pve.ssh_port,
        },
    }
    config[key + "kubernetes"] = {"kubeconfig": str(kubeconfig), "context": "e2e"}
    if chart is not None:
        config[key + "gpuOperator"] = {**config[key + "gpuOperator"], "chart": str(chart)}
    return config


def supports_local_chart() -> bool:
    return "chart" in GpuOperatorConfig.model_fields


def project_copy(work: Path, upstream: Path) -> Path:
    """The program as committed. Until `gpuOperator.chart` exists (issue 18), a scratch copy whose release
    names the chart directory instead of the NGC repository: the only change, and only in this copy."""
    if supports_local_chart():
        return ROOT_DIR
    copy_dir = work / "project"
    ignore = shutil.ignore_patterns(".venv", ".tools", ".git", "build", "__pycache__", ".*_cache")
    shutil.copytree(ROOT_DIR, copy_dir, ignore=ignore)
    (copy_dir / ".venv").symlink_to(ROOT_DIR / ".venv")
    component = copy_dir / "components" / "gpu_platform" / "component.py"
    text = component.read_text()
    original = "            chart=CHART_NAME,\n            version=operator_cfg.chart_version,\n"
    original += '            repository_opts={"repo": operator_cfg.chart_repository},\n'
    assert original in text, "the release's chart arguments changed: update tests/e2e/engine_stack.py"
    component.write_text(text.replace(original, f"            chart={str(upstream / LOCAL_CHART)!r},\n"))
    return copy_dir


@dataclass
class Engine:
    """`pulumi` with this session's backend, home and stack file."""

    project: Path
    work: Path
    stack_file: Path
    env: dict[str, str]
    # The secret values the stack file holds now (plain), so that only a changed one is set again.
    secrets: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, project: Path, work: Path, extra_path: list[Path], agent_socket: str) -> Engine:
        home = work / "home"
        home.mkdir(parents=True, exist_ok=True)
        (work / "state").mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "KUBECONFIG"))}
        env |= {
            "HOME": str(home),
            "PULUMI_HOME": str(home / ".pulumi"),
            "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "UV_OFFLINE": "1",
            "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv"),
            "SSH_AUTH_SOCK": agent_socket,
            "GPU_POOL_POLL_SECONDS": POLL_SECONDS,
            "PATH": os.pathsep.join([*(str(p) for p in extra_path), os.environ.get("PATH", "")]),
        }
        return cls(project, work, work / f"Pulumi.{STACK}.yaml", env)

    def run(self, *args: str, check: bool = True, timeout: int = TIMEOUT_SECONDS) -> subprocess.CompletedProcess[str]:
        argv = ["pulumi", *args, "--stack", STACK, "--non-interactive", "--config-file", str(self.stack_file)]
        if args[0] in ("stack",) and args[1:2] == ("init",):
            argv = ["pulumi", *args, "--non-interactive"]
        done = subprocess.run(
            argv, cwd=self.project, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        log = self.work / "pulumi.log"
        with log.open("a") as out:
            out.write(f"$ {' '.join(argv)}\n{done.stdout}\n{done.stderr}\n(exit {done.returncode})\n")
        if check and done.returncode != 0:
            raise EngineError(f"pulumi {' '.join(args)} failed ({done.returncode}):\n{_tails(done)}")
        return done

    def init(self, config: dict[str, Any]) -> None:
        self.run("stack", "init", STACK, "--secrets-provider", "passphrase")
        self.write_config(config)
        self.set_secrets({f"{PROJECT}:{key}": value for key, value in SECRETS.items()})

    def set_secrets(self, values: dict[str, str]) -> None:
        """`pulumi config set --secret` for each value that differs from what the stack file holds."""
        for key, value in values.items():
            if self.secrets.get(key) != value:
                self.run("config", "set", "--secret", key, value)
                self.secrets[key] = value

    def write_config(self, config: dict[str, Any]) -> None:
        """The stack file's plain keys; its secrets and encryption salt stay as `pulumi config set` wrote them."""
        existing = yaml.safe_load(self.stack_file.read_text()) if self.stack_file.exists() else {}
        existing = existing or {}
        kept = {k: v for k, v in (existing.get("config") or {}).items() if isinstance(v, dict) and "secure" in v}
        existing["config"] = {**config, **kept}
        self.stack_file.write_text(yaml.safe_dump(existing, sort_keys=False))

    def preview_json(self, *extra: str) -> dict[str, Any]:
        done = self.run("preview", "--json", "--diff", *extra, check=False)
        try:
            document: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            raise EngineError(f"pulumi preview --json printed no JSON ({done.returncode}):\n{_tails(done)}") from None
        if done.returncode != 0:
            document["_failed"] = done.stdout + done.stderr
        return document

    def up(self) -> subprocess.CompletedProcess[str]:
        return self.run("up", "--yes", "--skip-preview", "--suppress-progress")

    def export(self, *extra: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.run("stack", "export", *extra).stdout)
        return state

    def last_update(self) -> dict[str, Any]:
        history: list[dict[str, Any]] = json.loads(self.run("stack", "history", "--json").stdout)
        return history[0]


def _tails(done: subprocess.CompletedProcess[str]) -> str:
    return f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"


def operations(preview: dict[str, Any]) -> dict[str, str]:
    """The engine's operation on each resource (by name) that is not `same`: one per name, replacement steps
    folded into `replace` (create-replacement + delete-replaced or replace are one replacement)."""
    found: dict[str, str] = {}
    for step in preview.get("steps") or []:
        name = step["urn"].rsplit("::", 1)[-1]
        op = step["op"]
        if op in ("create-replacement", "delete-replaced", "replace", "discard-replaced"):
            op = "replace"
        if op in ("same", "read", "refresh"):
            continue
        found[name] = op
    return found


def replace_keys(preview: dict[str, Any]) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for step in preview.get("steps") or []:
        if step.get("replaceReasons"):
            keys[step["urn"].rsplit("::", 1)[-1]] = sorted(step["replaceReasons"])
    return keys


def prod_config() -> dict[str, Any]:
    return read_stack_file("prod")
