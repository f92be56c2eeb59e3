"""`pulumi up` of this program under the real engine, language host and providers.

The cluster is the e2e tier's real kube-apiserver; Proxmox is the loopback stand-in (tests/e2e/proxmox_api.py)
with a real sshd for the snippet upload; what kubelets and controllers would report is played by
tests/e2e/cluster_standin.py. One base `up` of prod (the `deployed` fixture) is shared with
tests/e2e/test_engine_diff.py.
"""

from __future__ import annotations

from offline.runner import PROJECT
from tests.e2e.engine_deployed import Deployed
from tests.e2e.engine_stack import (
    API_TOKEN_SECRET,
    PASSPHRASE,
    RKE2_TOKEN,
    operations,
)
from tests.e2e.stacks import Previewed

FD = f"{PROJECT}:failureDomains"


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
