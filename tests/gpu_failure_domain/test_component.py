"""GpuFailureDomain under Pulumi mocks: what one Proxmox host's GPU worker registers, and in which order."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from offline.recording import Recording, Registration, is_secret, reveal
from tests.proxmox_hardware import ms01_host

Run = Callable[..., Recording]
DOMAINS = ("dc1", "dc2", "dc3")


def test_each_domain_vm_is_q35_seabios_with_the_card_by_mapping_on_pcie(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    for name in DOMAINS:
        vm = recording.named(f"{name}-vm").inputs
        assert vm["machine"] == "q35"
        assert vm["bios"] == "seabios"
        assert vm["hostpcis"] == [{"device": "hostpci0", "mapping": f"gpu-{name}", "pcie": True, "rombar": True}]
        assert "id" not in vm["hostpcis"][0], "a raw PCI id needs root@pam; the default must work with a token"


def test_each_domain_vm_starts_on_boot_so_the_lab_recovers_from_a_power_cut(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    assert all(recording.named(f"{name}-vm").inputs["onBoot"] is True for name in DOMAINS)


def test_vms_are_protected_by_default_and_protection_can_be_turned_off(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:failureDomains"][2]["protect"] = False
    recording = run_stack_program(prod_config)
    assert recording.named("dc1-vm").protect is True
    assert recording.named("dc2-vm").protect is True
    assert recording.named("dc3-vm").protect is False


def test_vm_sizes_and_cpu_type_come_from_config(run_stack_program: Run, prod_config):
    domain = prod_config["gpu-pool:failureDomains"][0]
    domain.update({"cores": 12, "memoryMiB": 49152, "diskGiB": 200})
    vm = run_stack_program(prod_config).named("dc1-vm").inputs
    assert vm["cpu"]["cores"] == 12 and vm["cpu"]["type"] == "host"
    assert vm["memory"]["dedicated"] == 49152
    assert vm["disks"][0]["size"] == 200
    assert vm["disks"][0]["importFrom"] == prod_config["gpu-pool:proxmox"]["cloudImage"]


def test_pci_mapping_matches_the_configured_card_on_its_node(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    for index, name in enumerate(DOMAINS):
        domain = prod_config["gpu-pool:failureDomains"][index]
        mapping = recording.named(f"{name}-pci-mapping").inputs
        assert mapping["name"] == f"gpu-{name}"
        assert mapping["maps"] == [
            {
                "node": domain["proxmoxNode"],
                "path": domain["gpu"]["pciAddress"],
                "id": domain["gpu"]["vendorDeviceId"],
                "iommuGroup": domain["gpu"]["iommuGroup"],
                "subsystemId": domain["gpu"]["subsystemId"],
            }
        ]


def test_vm_waits_for_its_mapping_and_its_cloud_init_snippet(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    vm = recording.named("dc1-vm")
    assert recording.urn_of("dc1-pci-mapping") in vm.dependencies
    assert recording.urn_of("dc1-cloud-init") in vm.dependencies


def test_raw_pci_id_is_an_explicit_opt_in_without_a_mapping(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:proxmox"]["auth"] = "rootPassword"
    prod_config["gpu-pool:failureDomains"][0]["gpu"]["passthrough"] = "raw"
    recording = run_stack_program(prod_config, {"proxmoxRootPassword": "pw"})
    assert recording.named("dc1-vm").inputs["hostpcis"][0]["id"] == "0000:01:00"
    assert not [r for r in recording.registrations if r.name == "dc1-pci-mapping"]
    provider = recording.named("proxmox").inputs
    assert provider["username"] == "root@pam" and is_secret(provider["password"])


def test_cloud_init_snippet_is_a_secret_because_it_holds_the_join_token(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config, {"rke2Token": "K10" + "ab" * 32 + "::server:join-secret"})
    snippet = recording.named("dc1-cloud-init").inputs
    assert snippet["contentType"] == "snippets"
    assert is_secret(snippet["sourceRaw"]["data"])
    assert "token: K10" + "ab" * 32 + "::server:join-secret" in reveal(snippet["sourceRaw"]["data"])


def test_a_non_default_ssh_port_reaches_the_provider_for_every_addressed_node(run_stack_program: Run, prod_config):
    addresses = {"pve-dc1": "10.10.21.5", "pve-dc2": "10.10.22.5", "pve-dc3": "10.10.23.5"}
    prod_config["gpu-pool:proxmox"]["ssh"] |= {"port": 2222, "nodeAddresses": addresses}
    provider = run_stack_program(prod_config).named("proxmox").inputs
    # A provider's object inputs reach the engine as JSON strings.
    assert json.loads(provider["ssh"])["nodes"] == [
        {"name": node, "address": address, "port": 2222} for node, address in sorted(addresses.items())
    ]


def test_proxmox_provider_token_is_a_secret(run_stack_program: Run, prod_config):
    token = "pulumi@pve!t=12345678-1234-1234-1234-123456789abc"
    provider = run_stack_program(prod_config, {"proxmoxApiToken": token}).named("proxmox").inputs
    assert is_secret(provider["apiToken"])
    assert provider["endpoint"] == "https://pve-dc1.lab.internal:8006/"


def test_labels_are_reconciled_by_node_patch_only_after_the_node_is_ready(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    patch = recording.named("dc3-node-labels")
    assert patch.type == "kubernetes:core/v1:NodePatch"
    assert patch.inputs["metadata"]["name"] == "rke2-worker-dc3-gpu-a"
    assert patch.inputs["metadata"]["labels"] == {
        "nodepool": "gpu",
        "topology.kubernetes.io/zone": "dc3",
        "nvidia.com/device-plugin.config": "whole",
    }
    assert recording.urn_of("dc3-node-ready") in patch.dependencies
    ready = recording.named("dc3-node-ready").inputs
    assert ready["environment"]["GPU_POOL_STEP"] == "node-ready"
    assert ready["environment"]["NODE_NAME"] == "rke2-worker-dc3-gpu-a"


def test_taint_is_never_set_through_node_patch_but_merged_by_kubectl(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    for patch in recording.by_type("kubernetes:core/v1:NodePatch"):
        assert "taints" not in (patch.inputs.get("spec") or {}), "spec.taints is atomic: SSA would wipe others"
    taint = recording.named("dc1-node-taint")
    assert taint.inputs["create"] == (
        "kubectl taint node rke2-worker-dc1-gpu-a nvidia.com/gpu=true:NoSchedule --overwrite"
    )
    assert "nvidia.com/gpu-" in taint.inputs["delete"]
    assert recording.urn_of("dc1-node-ready") in taint.dependencies


def test_a_replaced_taint_step_deletes_first_so_its_untaint_cannot_undo_the_new_taint(run_stack_program, prod_config):
    # Create-before-delete would run `kubectl taint node N nvidia.com/gpu-` after the new taint was set.
    assert run_stack_program(prod_config).named("dc1-node-taint").delete_before_replace is True


def test_kubectl_steps_use_the_configured_kubeconfig_and_context(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:kubernetes"] = {"kubeconfig": "/home/me/.kube/lab", "context": "lab"}
    recording = run_stack_program(prod_config)
    assert (
        recording.named("dc1-node-taint")
        .inputs["create"]
        .startswith("kubectl --kubeconfig /home/me/.kube/lab --context lab taint node")
    )
    assert recording.named("kubernetes").inputs["context"] == "lab"
    kubectl = '["kubectl", "--kubeconfig", "/home/me/.kube/lab", "--context", "lab"]'
    assert recording.named("dc1-node-ready").inputs["environment"]["KUBECTL"] == kubectl


def _power_cycle_environment(recording: Recording, name: str) -> dict[str, Any]:
    return dict(recording.named(f"{name}-power-cycle").inputs["environment"])


def test_power_cycle_runs_after_the_vm_and_before_the_node_wait(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    cycle = recording.named("dc1-power-cycle")
    assert recording.urn_of("dc1-vm") in cycle.dependencies
    assert recording.urn_of("dc1-power-cycle") in recording.named("dc1-node-ready").dependencies
    assert is_secret(cycle.inputs["environment"]["PROXMOX_API_TOKEN"])
    # An update runs the same script (pulumi-command runs create when no update is given): it decides from what
    # is really pending, not from what changed.
    assert "update" not in cycle.inputs
    assert "triggers" not in cycle.inputs


def test_the_provider_never_reboots_a_gpu_worker_itself(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    assert all(recording.named(f"{name}-vm").inputs["rebootAfterUpdate"] is False for name in DOMAINS)


def test_a_moved_card_or_a_cold_start_setting_runs_the_power_cycle_step(
    run_stack_program: Run, prod_config, monitor, pci_tables
):
    before = _power_cycle_environment(run_stack_program(prod_config), "dc1")
    monitor.recording.registrations.clear()
    pci_tables["pve-dc1"] = ms01_host(gpu_at="0000:02:00")  # the card moved to another slot
    prod_config["gpu-pool:failureDomains"][0]["gpu"]["pciAddress"] = "0000:02:00"
    moved = _power_cycle_environment(run_stack_program(prod_config), "dc1")
    assert moved["MAPPED_DEVICE"] != before["MAPPED_DEVICE"]
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][0].update({"cores": 16, "memoryMiB": 65536})
    resized = _power_cycle_environment(run_stack_program(prod_config), "dc1")
    assert resized["VM_SETTINGS"] != moved["VM_SETTINGS"]


def test_the_vm_names_its_snippet_by_its_fixed_volume_id_not_by_an_output(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    vm = recording.named("dc1-vm")
    assert vm.inputs["initialization"]["userDataFileId"] == "local:snippets/rke2-worker-dc1-gpu-a-user-data.yaml"
    assert recording.urn_of("dc1-cloud-init") in vm.dependencies
    assert "initialization" not in vm.property_dependencies or not vm.property_dependencies["initialization"]


def test_the_snippet_is_first_boot_only_and_deleted_before_it_is_ever_recreated(run_stack_program: Run, prod_config):
    snippet = run_stack_program(prod_config).named("dc1-cloud-init")
    assert snippet.ignore_changes == ["sourceRaw"]
    assert snippet.delete_before_replace is True


def test_the_vm_ignores_only_the_disk_speed_limits_it_never_sets(run_stack_program: Run, prod_config):
    # Any other drift of the VM must show in a preview; the speed block alone is a provider artefact.
    assert run_stack_program(prod_config).named("dc1-vm").ignore_changes == ["disks[0].speed"]


def _closure(recording: Recording, start: Registration) -> set[str]:
    by_urn = {r.urn: r for r in recording.registrations}
    seen: set[str] = set()
    stack = [start.urn]
    while stack:
        urn = stack.pop()
        for dep in [*by_urn[urn].dependencies, by_urn[urn].parent]:
            if dep in by_urn and dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def test_no_resource_of_one_domain_depends_on_another_domain(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    domain_urn = {name: recording.urn_of(name) for name in DOMAINS}
    for registration in recording.registrations:
        owners = [name for name in DOMAINS if registration.name.startswith(f"{name}-") or registration.name == name]
        if not owners:
            continue
        reached = _closure(recording, registration)
        for other in DOMAINS:
            if other == owners[0]:
                continue
            foreign = {u for u in reached if u == domain_urn[other] or u.rsplit("::", 1)[-1].startswith(f"{other}-")}
            assert not foreign, f"{registration.name} depends on {sorted(foreign)}"


def test_a_removed_domains_node_object_is_deleted_after_its_vm(run_stack_program: Run, prod_config):
    """Deletes run dependents first: the VM depends on the cleanup step, so the VM goes first and then the step's
    delete removes the Node object the VM leaves behind."""
    recording = run_stack_program(prod_config)
    cleanup = recording.named("dc2-node-cleanup")
    assert cleanup.urn in recording.named("dc2-vm").dependencies
    assert cleanup.inputs["delete"].endswith("delete node rke2-worker-dc2-gpu-a --ignore-not-found --wait=false")
    assert "kubectl" in cleanup.inputs["delete"]
    # And the drain before it: a step that depends on the VM is deleted, so drains the node, before the VM stops.
    retire = recording.named("dc2-retire")
    assert recording.urn_of("dc2-vm") in retire.dependencies
    assert "kubectl drain rke2-worker-dc2-gpu-a --ignore-daemonsets" in retire.inputs["delete"]


def test_every_domain_resource_is_parented_to_its_component(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    component = recording.named("dc2")
    assert component.type == "gpu-pool:proxmox:GpuFailureDomain"
    children = [r for r in recording.registrations if r.name.startswith("dc2-")]
    assert {r.parent for r in children} == {component.urn}
    assert {r.name for r in children} == {
        "dc2-node-cleanup",
        "dc2-retire",
        "dc2-rollout",
        "dc2-pci-mapping",
        "dc2-cloud-init",
        "dc2-vm",
        "dc2-power-cycle",
        "dc2-node-ready",
        "dc2-node-labels",
        "dc2-node-taint",
        "dc2-gpu-ready",
        "dc2-cuda-smoke-test",
    }


def test_stack_exports_each_domain_and_the_article_total_of_nine_slots(run_stack_program: Run, prod_config):
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["schedulableGpuSlots"] == 9
    assert outputs["failureDomains"]["dc1"] == {
        "nodeName": "rke2-worker-dc1-gpu-a",
        "vmId": 4101,
        "zone": "dc1",
        "sharingProfile": "a1000-x4",
        "gpuSlots": 4,
        "preflight": "passed: 10de:25b0 at 0000:01:00.0, 0000:01:00.1, IOMMU group 14 of its own",
    }
    assert outputs["failureDomains"]["dc3"]["gpuSlots"] == 1


def test_no_command_of_the_stack_sends_its_create_again_as_its_update(run_stack_program: Run, prod_config):
    # pulumi-command runs `create` on an update when no `update` is given (commandController.go Update, v1.2.1):
    # a copy of the 31 KB node-steps script per step was a third of every preview's bytes (docs/engine.md).
    recording = run_stack_program(prod_config)
    commands = recording.by_type("command:local:Command") + recording.by_type("command:remote:Command")
    assert len(commands) > 10
    assert not [c.name for c in commands if "update" in c.inputs and c.inputs["update"] == c.inputs["create"]]
