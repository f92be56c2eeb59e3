"""`pulumi up` of this program under the real engine, language host and providers.

The cluster is the e2e tier's real kube-apiserver; Proxmox is the loopback stand-in (tests/e2e/proxmox_api.py)
with a real sshd for the snippet upload; what kubelets and controllers would report is played by
tests/e2e/cluster_standin.py. One base `up` of prod (the `deployed` fixture) is shared with
tests/e2e/test_engine_diff.py; a test that changes the stack puts it back.
"""

from __future__ import annotations

from offline.runner import PROJECT
from tests.e2e.engine import PASSPHRASE
from tests.e2e.engine_deployed import Deployed, changed, last_update, preview, rewrite_config
from tests.e2e.engine_stacks import SECRETS, offline_plan_names

FD = f"{PROJECT}:failureDomains"
SNIPPETS = ("local", "snippets")


def test_up_creates_every_resource_the_offline_preview_plans_with_the_real_providers(deployed: Deployed) -> None:
    state = deployed.stack.export()
    created = {r["urn"].rsplit("::", 1)[-1] for r in state["deployment"]["resources"]}
    assert offline_plan_names(deployed.base) - created == set(), "planned offline but not created by the engine"
    assert deployed.pve.unanswered() == [], "the stand-in was asked what it does not answer"
    # The real provider's calls, as a real PVE would have seen them.
    assert ("POST", "/nodes/pve-dc1/qemu") in deployed.pve.requests("POST")
    assert ("POST", "/cluster/mapping/pci") in deployed.pve.requests("POST")
    vm = deployed.pve.state.vms[4101]
    assert vm.status == "running" and "mapping=gpu-dc1" in vm.config["hostpci0"]
    snippet = deployed.pve.state.storage_dir.joinpath(*SNIPPETS, "rke2-worker-dc1-gpu-a-user-data.yaml")
    assert snippet.read_text().startswith("#cloud-config"), "the snippet went over SSH to the datastore's path"


def test_a_second_up_with_no_change_updates_and_replaces_nothing(deployed: Deployed) -> None:
    document, failure = preview(deployed.stack)
    assert failure == ""
    assert changed(document) == {}
    deployed.stack.up()
    assert set(last_update(deployed.stack)["resourceChanges"]) == {"same"}


def test_secret_values_never_appear_unencrypted_in_state_export_stack_file_or_logs(deployed: Deployed) -> None:
    stack = deployed.stack
    places = {
        "the state backend": stack.state_text(),
        "stack export": stack.run("stack", "export").stdout,
        "the stack file": stack.stack_file.read_text(),
        "pulumi up's output": stack.run("up", "--yes", "--skip-preview").stdout,
    }
    for log in (stack.work / "pulumi-home").rglob("*.log"):
        places[str(log)] = log.read_text(errors="replace")
    for where, text in places.items():
        for name, value in SECRETS.items():
            assert value not in text, f"{name} in plain text in {where}"
    assert PASSPHRASE not in places["the stack file"]
    assert SECRETS["rke2Token"] in stack.run("stack", "export", "--show-secrets").stdout, "kept, encrypted"


def test_protect_on_the_vm_refuses_to_delete_a_removed_domain_and_deletes_nothing(deployed: Deployed) -> None:
    # `pulumi up` as a user runs it: its preview refuses the protected delete before any step runs. (With
    # --skip-preview the engine would delete the domain's unprotected resources first: docs/diff.md says so.)
    deletes_before = len(deployed.pve.requests("DELETE"))
    rewrite_config(deployed.stack, deployed.config_with(lambda c: c[FD].pop()))
    try:
        done = deployed.stack.run("up", "--yes", check=False)
    finally:
        rewrite_config(deployed.stack, deployed.base)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "dc3-vm" in output and "protect" in output.lower(), output[-3000:]
    assert 4301 in deployed.pve.state.vms, "the protected VM was deleted"
    assert deployed.pve.requests("DELETE")[deletes_before:] == [], "Proxmox objects were deleted"
    assert "rke2-worker-dc3-gpu-a" in deployed.cluster.node_names(), "the domain's Node was deleted"


def test_ignore_changes_keeps_the_snippet_when_its_user_data_changes(deployed: Deployed) -> None:
    # A rotated join token changes every domain's user data; cloud-init already ran, so nothing may follow it.
    snippet = deployed.pve.state.storage_dir.joinpath(*SNIPPETS, "rke2-worker-dc2-gpu-a-user-data.yaml")
    before = snippet.read_text()
    deletes_before = len(deployed.pve.requests("DELETE"))
    deployed.set_secrets({**deployed.secrets, "rke2Token": "K10" + "f00d" * 16 + "::server:rotated"})
    try:
        deployed.stack.up()
        changes = last_update(deployed.stack)["resourceChanges"]
    finally:
        deployed.set_secrets(dict(SECRETS))
    assert set(changes) == {"same"}, changes
    assert snippet.read_text() == before, "the snippet was rewritten: its VM would re-run first boot"
    assert deployed.pve.requests("DELETE")[deletes_before:] == []
