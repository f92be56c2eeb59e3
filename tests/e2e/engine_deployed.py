"""One base `pulumi up` of prod, shared by the engine tests: the Proxmox stand-in, the cluster stand-in, the CLI."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.loader import validate_stack
from offline.runner import PROJECT, ROOT_DIR
from tests.e2e.cluster_standin import ClusterStandIn, cluster_standin
from tests.e2e.engine_stack import (
    API_TOKEN,
    ENGINE_BIN,
    Engine,
    prod_config,
    project_copy,
    stack_config,
    supports_local_chart,
)
from tests.e2e.proxmox_api import a1000_host
from tests.e2e.proxmox_standin import SSHD, ProxmoxStandIn, start_proxmox
from tests.e2e.servers import Cluster, Tools

ENGINE_TOOLS = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-resource-kubernetes",
    "pulumi-resource-command",
    "pulumi-resource-proxmoxve",
)
# The stack's three hosts, and the two a change-table row adds or moves a domain to.
PROXMOX_NODES = ("pve-dc1", "pve-dc2", "pve-dc3", "pve-dc4", "pve-dc9")


@dataclass
class Deployed:
    engine: Engine
    pve: ProxmoxStandIn
    cluster: ClusterStandIn
    base: dict[str, Any]

    def config_with(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        config = copy.deepcopy(self.base)
        change(config)
        return config


def engine_missing() -> list[str]:
    missing = [name for name in ENGINE_TOOLS if not (ENGINE_BIN / name).is_file()]
    return missing + ([] if SSHD.is_file() else [str(SSHD)])


@contextmanager
def deploy(tools: Tools, cluster: Cluster, upstream: Path, work: Path) -> Iterator[Deployed]:
    missing = engine_missing()
    if missing:
        message = f"{', '.join(missing)} missing: run `make engine-tools` (and install openssh-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    nodes = {node: a1000_host() for node in PROXMOX_NODES}
    with start_proxmox(work / "pve", nodes, API_TOKEN) as pve:
        chart = upstream / "gpu-operator" / "v26.3.2" / "chart" if supports_local_chart() else None
        base = stack_config(prod_config(), pve, cluster.kubeconfig, chart)
        stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in base.items()})
        with cluster_standin(cluster.kubeconfig, pve.state, stack) as standin:
            path = [ENGINE_BIN, tools.bin_dir, ROOT_DIR / ".tools" / "bin"]
            engine = Engine.create(project_copy(work, upstream), work, path, pve.ssh_agent_socket)
            engine.init(base)
            engine.up()
            yield Deployed(engine, pve, standin, base)
        assert not standin.errors, standin.errors[:5]
