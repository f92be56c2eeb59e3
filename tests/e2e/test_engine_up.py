"""`pulumi up` of this program under the real engine, language host and providers.

The cluster is the e2e tier's real kube-apiserver; Proxmox is the loopback stand-in (tests/e2e/proxmox_api.py)
with a real sshd for the snippet upload; what kubelets and controllers would report is played by
tests/e2e/cluster_standin.py. One base `up` of prod is shared by every test in this module.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.loader import validate_stack
from offline.runner import PROJECT
from tests.e2e.cluster_standin import ClusterStandIn, cluster_standin
from tests.e2e.engine_stack import (
    API_TOKEN,
    API_TOKEN_SECRET,
    ENGINE_BIN,
    PASSPHRASE,
    RKE2_TOKEN,
    Engine,
    operations,
    prod_config,
    project_copy,
    stack_config,
    supports_local_chart,
)
from tests.e2e.proxmox_api import a1000_host
from tests.e2e.proxmox_standin import SSHD, ProxmoxStandIn, start_proxmox
from tests.e2e.servers import Cluster, Tools
from tests.e2e.stacks import Previewed

FD = f"{PROJECT}:failureDomains"
ENGINE_TOOLS = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes", "pulumi-resource-command")


@dataclass
class Deployed:
    engine: Engine
    pve: ProxmoxStandIn
    cluster: ClusterStandIn
    base: dict[str, Any]
    upstream: Path

    def config_with(self, change: Any) -> dict[str, Any]:
        config = copy.deepcopy(self.base)
        change(config)
        return config


def engine_missing() -> list[str]:
    wanted = [*ENGINE_TOOLS, "pulumi-resource-proxmoxve"]
    return [name for name in wanted if not (ENGINE_BIN / name).is_file()]


@pytest.fixture(scope="module")
def deployed(
    e2e_tools: Tools,
    cluster: Cluster,
    crds: list[str],
    upstream: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployed]:
    missing = engine_missing() + ([] if SSHD.is_file() else [str(SSHD)])
    if missing:
        message = f"{', '.join(missing)} missing: run `make engine-tools` (and install openssh-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path_factory.mktemp("engine-up")
    nodes = {f"pve-dc{i}": a1000_host() for i in (1, 2, 3, 4, 9)}
    with start_proxmox(work / "pve", nodes, API_TOKEN) as pve:
        chart = upstream / "gpu-operator" / "v26.3.2" / "chart" if supports_local_chart() else None
        base = stack_config(prod_config(), pve, cluster.kubeconfig, chart)
        stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in base.items()})
        with cluster_standin(cluster.kubeconfig, pve.state, stack) as standin:
            engine = Engine.create(
                project_copy(work, upstream),
                work,
                [ENGINE_BIN, e2e_tools.bin_dir, Path(__file__).resolve().parents[2] / ".tools" / "bin"],
                pve.ssh_agent_socket,
            )
            engine.init(base)
            engine.up()
            yield Deployed(engine, pve, standin, base, upstream)
        assert not standin.errors, standin.errors[:5]


def test_up_creates_every_resource_the_offline_preview_plans_with_the_real_providers(
    deployed: Deployed, prod_stack: Previewed
) -> None:
    state = deployed.engine.export()
    created = {r["urn"].rsplit("::", 1)[-1] for r in state["deployment"]["resources"]}
    planned = {r["name"] for r in prod_stack.plan["resources"]}
    assert planned - created == set(), "planned offline but not created by the engine"
    assert not deployed.pve.unanswered(), "the stand-in was asked what it does not answer"
    # The real provider's calls, as a real PVE would have seen them.
    assert ("POST", "/nodes/pve-dc1/qemu") in deployed.pve.requests("POST")
    assert ("POST", "/cluster/mapping/pci") in deployed.pve.requests("POST")
    vm = deployed.pve.state.vms[4101]
    assert vm.status == "running" and "mapping=gpu-dc1" in vm.config["hostpci0"]
    snippet = deployed.pve.state.storage_dir / "local" / "snippets" / "rke2-worker-dc1-gpu-a-user-data.yaml"
    assert snippet.read_text().startswith("#cloud-config"), "the snippet went over SSH to the datastore's path"


def test_a_second_up_with_no_change_updates_and_replaces_nothing(deployed: Deployed) -> None:
    preview = deployed.engine.preview_json()
    assert "_failed" not in preview, preview.get("_failed")
    assert operations(preview) == {}
    deployed.engine.up()
    changes = deployed.engine.last_update()["resourceChanges"]
    assert set(changes) == {"same"}, changes


def test_secret_values_never_appear_unencrypted_in_state_export_stack_file_or_logs(deployed: Deployed) -> None:
    state_files = list((deployed.engine.work / "state").rglob("*.json"))
    places = {str(p): p.read_text() for p in state_files}
    places["stack export"] = deployed.engine.run("stack", "export").stdout
    places["stack file"] = deployed.engine.stack_file.read_text()
    places["pulumi output"] = (deployed.engine.work / "pulumi.log").read_text()
    for log in (deployed.engine.work / "home" / ".pulumi").rglob("*.log"):
        places[str(log)] = log.read_text(errors="replace")
    assert state_files, "no state file in the file backend"
    for where, text in places.items():
        for secret in (RKE2_TOKEN, API_TOKEN_SECRET):
            assert secret not in text, f"a secret in plain text in {where}"
    assert PASSPHRASE not in places["stack file"]
    shown = deployed.engine.run("stack", "export", "--show-secrets").stdout
    assert RKE2_TOKEN in shown, "the secret is in the state, encrypted: --show-secrets reveals it"


def test_protect_on_the_vm_refuses_to_delete_a_removed_domain_and_deletes_nothing(deployed: Deployed) -> None:
    engine = deployed.engine
    engine.write_config(deployed.config_with(lambda c: c[FD].pop()))
    try:
        done = engine.run("up", "--yes", "--skip-preview", check=False)
    finally:
        engine.write_config(deployed.base)
    assert done.returncode != 0
    assert "dc3-vm" in done.stdout + done.stderr and "protect" in (done.stdout + done.stderr).lower()
    assert 4301 in deployed.pve.state.vms, "the protected VM was deleted"
    assert not deployed.pve.requests("DELETE", "/qemu/4301")


def test_ignore_changes_keeps_the_snippet_when_its_user_data_changes(deployed: Deployed) -> None:
    engine = deployed.engine
    snippet = deployed.pve.state.storage_dir / "local" / "snippets" / "rke2-worker-dc2-gpu-a-user-data.yaml"
    before = snippet.read_text()
    engine.write_config(deployed.config_with(lambda c: c[f"{PROJECT}:rke2"].update({"version": "v1.33.6+rke2r1"})))
    try:
        engine.up()
        changes = engine.last_update()["resourceChanges"]
    finally:
        engine.write_config(deployed.base)
    assert set(changes) == {"same"}, changes
    assert snippet.read_text() == before, "the snippet was rewritten: its VM would re-run first boot"
    assert not deployed.pve.requests("DELETE", "/storage/local/content")
