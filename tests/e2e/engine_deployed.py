"""One real `pulumi up` of prod, shared by the engine tests, against the e2e control plane (tests/e2e/control_plane.py)
with Kyverno running and the GPU Operator's controller started once the chart installs it
(tests/e2e/cluster_programs.py), and the Proxmox and cluster stand-ins around it.

The stack is the lead harness's PulumiStack (tests/e2e/engine.py): a temp project, a file backend, passphrase
secrets. On top: the stack file points the Proxmox side at the loopback stand-in (its API, and its sshd through
`proxmox.ssh.nodeAddresses` and `proxmox.ssh.port`), the preflights run for real (no GPU_POOL_OFFLINE), the
provider gets the stand-in's ssh-agent, and HOME is the temp dir too (bpg writes each run's new sshd host key to
~/.ssh/known_hosts).
"""

from __future__ import annotations

import copy
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.stack_check import validate_stack
from offline.runner import PROJECT, read_stack_file
from tests.e2e.cluster_programs import OperatorLauncher, gpu_operator_once_installed
from tests.e2e.cluster_standin import ClusterStandIn, cluster_standin
from tests.e2e.control_plane import ControlPlane
from tests.e2e.engine import Engine, PulumiStack, parse_json_output, step_ops
from tests.e2e.engine_stacks import SECRETS, engine_config, new_stack
from tests.e2e.proxmox_api import a1000_host
from tests.e2e.proxmox_standin import ProxmoxStandIn, start_proxmox
from tests.e2e.servers import Tools

STACK = "e2e-up"
# The stack's three hosts, and the two a change-table row adds a domain on or moves one to.
PROXMOX_NODES = ("pve-dc1", "pve-dc2", "pve-dc3", "pve-dc4", "pve-dc9")
# How often the node steps look (their default, 10 s, is made for VMs that take minutes to boot).
POLL_SECONDS = "1"
API_TOKEN = SECRETS["proxmoxApiToken"]
PROXY = "http://proxy.lab.internal:3128"


def stack_config(pve: ProxmoxStandIn, kubeconfig: Path, chart: Path, *, proxy_login: bool = False) -> dict[str, Any]:
    """prod as committed, its cluster the e2e API server and its Proxmox side the stand-in."""
    config = engine_config(read_stack_file("prod"), kubeconfig, chart)
    # The session's cluster already has the chart's CRDs (the `crds` fixture applies them, as a lab's earlier Helm
    # install of the operator left them): the stack adopts them, as a lab moving to the chart on disk does.
    config[f"{PROJECT}:kubernetes"] = {**config[f"{PROJECT}:kubernetes"], "adoptExisting": True}
    # A gate that cannot pass must fail the test in minutes, not after the default hour.
    config[f"{PROJECT}:smokeTest"] = {**config.get(f"{PROJECT}:smokeTest", {}), "gpuReadyTimeoutMinutes": 5}
    if proxy_login:
        # Behind a proxy that asks for a login, as a corporate lab is (issue 50): the login is the secret proxyAuth
        # (engine_stacks.SECRETS); tests/e2e/test_canaries_deployed.py follows it to the VM's snippet and the driver.
        config[f"{PROJECT}:proxy"] = {"http": PROXY, "https": PROXY, "login": True, "noProxy": [".lab.internal"]}
    config[f"{PROJECT}:proxmox"] = {
        **config[f"{PROJECT}:proxmox"],
        "endpoint": pve.endpoint,
        "insecure": True,
        "ssh": {
            "username": pve.ssh_user,
            "agent": True,
            "nodeAddresses": {node: "127.0.0.1" for node in PROXMOX_NODES},
            "port": pve.ssh_port,
        },
    }
    return config


def rewrite_config(stack: PulumiStack, config: dict[str, Any]) -> None:
    """The stack file's plain keys, as a user edits them; the salt and the secrets stay as the CLI wrote them."""
    document = yaml.safe_load(stack.stack_file.read_text()) or {}
    secure = {k: v for k, v in (document.get("config") or {}).items() if isinstance(v, dict) and "secure" in v}
    document["config"] = {**config, **secure}
    stack.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


def preview(stack: PulumiStack) -> tuple[dict[str, Any], str]:
    """`pulumi preview --diff --json`: the document, and the CLI's output if it failed ('' if it passed)."""
    done = stack.run("preview", "--json", "--diff", check=False)
    document = parse_json_output(done.stdout)
    return document, "" if done.returncode == 0 else done.stdout + done.stderr


def changed(document: dict[str, Any]) -> dict[str, str]:
    """The engine's operation on every resource that is not left as it is."""
    return {name: op for name, op in step_ops(document).items() if op not in ("same", "read", "refresh")}


def replace_keys(document: dict[str, Any]) -> dict[str, list[str]]:
    return {
        step["urn"].rsplit("::", 1)[-1]: sorted(step["replaceReasons"])
        for step in document.get("steps", [])
        if step.get("replaceReasons")
    }


def last_update(stack: PulumiStack) -> dict[str, Any]:
    history: list[dict[str, Any]] = yaml.safe_load(stack.run("stack", "history", "--json").stdout)
    return history[0]


@dataclass
class Deployed:
    stack: PulumiStack
    pve: ProxmoxStandIn
    cluster: ClusterStandIn
    # The control plane it runs on, and the GPU Operator's process there.
    plane: ControlPlane
    operator: OperatorLauncher
    base: dict[str, Any]
    # The secret values the stack file holds now, so that only a changed one is set again.
    secrets: dict[str, str]
    # The smoke tests' pods and events as the first `up` left them: a later wave's drain evicts a finished pod.
    first_smoke: dict[str, Any]
    # The preview before the first `up` without gpu-pool:kubernetes.adoptExisting, and that `up`'s output.
    refused: str = ""
    first_up: str = ""

    def config_with(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        config = copy.deepcopy(self.base)
        change(config)
        return config

    def set_secrets(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            if self.secrets.get(key) != value:
                self.stack.set_secret(key, value)
                self.secrets[key] = value


# A wave's steps (components/gpu_failure_domain/wave_steps.py) are registered only in the `up` that rolls it.
WAVE_STEP = re.compile(
    r"^dc\d-(wave-drain|wave-gate|rke2-login|rke2-upgrade|device-plugin-restart|kernel-login|kernel-install|"
    r"kernel-driver-rebuild)$"
)


def up_settled(deployed: Deployed) -> subprocess.CompletedProcess[str]:
    """`up`, then, if it rolled a wave, the next `up`, which must do nothing but delete the wave's steps; returns
    the first `up`'s run.

    `make diff` compares two stack files, each as a settled deployment: a wave's steps are not in its before-file's
    plan. Right after a wave they are still in the state, and the engine would show the next wave's steps as
    replacements of them, not creations (docs/verification.md)."""
    done = deployed.stack.up()
    document, failure = preview(deployed.stack)
    assert failure == "", failure[-3000:]
    left = changed(document)
    assert all(op == "delete" and WAVE_STEP.match(name) for name, op in left.items()), left
    if left:
        deployed.stack.up()
    return done


@contextmanager
def deploy(
    engine: Engine,
    path: list[Path],
    plane: ControlPlane,
    tools: Tools,
    chart: Path,
    work: Path,
    *,
    proxy_login: bool = False,
) -> Iterator[Deployed]:
    """The stand-ins, the operator's launcher, the stack and its first `up`; everything stops when the block ends."""
    cluster = plane.kubeconfig
    with start_proxmox(work / "pve", {node: a1000_host() for node in PROXMOX_NODES}, API_TOKEN) as pve:
        base = stack_config(pve, cluster, chart, proxy_login=proxy_login)
        config = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in base.items()})
        namespace = config.gpu_operator.namespace
        with (
            cluster_standin(cluster, pve.state, config) as standin,
            gpu_operator_once_installed(tools, plane, namespace) as operator,
        ):
            env = {
                "HOME": str(work / "home"),
                "SSH_AUTH_SOCK": pve.ssh_agent_socket,
                "GPU_POOL_POLL_SECONDS": POLL_SECONDS,
            }
            (work / "home").mkdir()
            without = copy.deepcopy(base)
            without[f"{PROJECT}:kubernetes"].pop("adoptExisting")
            stack = new_stack(engine, work / "engine", STACK, without, path, env)
            refused = stack.run("preview", check=False)
            assert refused.returncode != 0, "the preview adopted the cluster's CRDs without being told to"
            rewrite_config(stack, base)
            first = stack.up()
            smoke = ["-n", config.smoke_test.namespace, "get"]
            first_smoke = {"pods": plane.kubectl.json(*smoke, "pods"), "events": plane.kubectl.json(*smoke, "events")}
            yield Deployed(
                stack,
                pve,
                standin,
                plane,
                operator,
                base,
                dict(SECRETS),
                first_smoke,
                refused.stdout + refused.stderr,
                first.stdout + first.stderr,
            )
        assert not standin.errors, standin.errors[:5]
        assert not operator.errors, operator.errors[:5]
