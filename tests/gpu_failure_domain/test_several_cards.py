"""A host with several cards: every card passed into the domain's one VM, counted, checked and gated."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.gpu_failure_domain.host_preflight import host_check_problems
from config.failure_domain import FailureDomainConfig
from offline.recording import Recording
from tests.config.refusal import refused
from tests.proxmox_hardware import device, ms01_host

Run = Callable[..., Recording]
FD = "gpu-pool:failureDomains"


def second_card(first: dict[str, Any], *, at: str = "0000:02:00", group: int = 15, **changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(first), "pciAddress": at, "iommuGroup": group, **changes}


def two_cards(config: dict[str, Any], index: int = 0, **changes: Any) -> dict[str, Any]:
    """Domain `index` of the config with a second card of the same model at 0000:02:00, group 15."""
    domain: dict[str, Any] = config[FD][index]
    first = domain.pop("gpu")
    domain["gpus"] = [first, second_card(first, **changes)]
    return domain


def two_card_host(group: int = 15) -> list[dict[str, Any]]:
    """An MS-01 with two RTX A1000s, each with its audio function, each in its own IOMMU group."""
    return [
        *ms01_host(),
        device("0000:02:00.0", "10de", "25b0", group, name="GA107GL [RTX A1000]"),
        device("0000:02:00.1", "10de", "2291", group, name="GA107 High Definition Audio"),
    ]


def test_a_one_card_domain_written_as_a_list_registers_exactly_what_gpu_registers(run_stack_program: Run, monitor):
    from offline.runner import read_stack_file

    as_gpu = copy.deepcopy(read_stack_file("prod"))
    as_list = copy.deepcopy(as_gpu)
    for domain in as_list[FD]:
        domain["gpus"] = [domain.pop("gpu")]
    before = {r.name: (r.type, r.inputs) for r in run_stack_program(as_gpu).registrations}
    monitor.recording.registrations.clear()
    after = {r.name: (r.type, r.inputs) for r in run_stack_program(as_list).registrations}
    assert after == before


def test_each_card_gets_its_own_mapping_and_hostpci_in_list_order(run_stack_program: Run, prod_config, pci_tables):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    recording = run_stack_program(prod_config)
    vm = recording.named("dc1-vm").inputs
    assert vm["hostpcis"] == [
        {"device": "hostpci0", "mapping": "gpu-dc1", "pcie": True, "rombar": True},
        {"device": "hostpci1", "mapping": "gpu-dc1-1", "pcie": True, "rombar": True},
    ]
    assert recording.named("dc1-pci-mapping").inputs["maps"][0]["path"] == "0000:01:00"
    second = recording.named("dc1-pci-mapping-1").inputs
    assert second["name"] == "gpu-dc1-1"
    assert second["maps"][0]["path"] == "0000:02:00" and second["maps"][0]["iommuGroup"] == 15
    assert "2x NVIDIA RTX A1000" in vm["description"]


def test_adding_a_card_keeps_the_first_cards_resource_name_and_slot(
    run_stack_program: Run, prod_config, monitor, pci_tables
):
    pci_tables["pve-dc1"] = two_card_host()
    before = run_stack_program(copy.deepcopy(prod_config))
    first_mapping = before.named("dc1-pci-mapping")
    monitor.recording.registrations.clear()
    two_cards(prod_config)
    after = run_stack_program(prod_config)
    assert after.named("dc1-pci-mapping").type == first_mapping.type
    assert after.named("dc1-pci-mapping").inputs == first_mapping.inputs
    assert after.named("dc1-vm").inputs["hostpcis"][0] == before.named("dc1-vm").inputs["hostpcis"][0]


def test_slots_count_every_card_of_a_domain(run_stack_program: Run, prod_config, pci_tables):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    outputs = run_stack_program(prod_config).stack_outputs
    # dc1's profile gives 4 slots per card: two cards give 8; dc2 4 and dc3 1 as before.
    assert outputs["failureDomains"]["dc1"]["gpuSlots"] == 8
    assert outputs["schedulableGpuSlots"] == 13


def test_the_gpu_ready_gate_waits_for_the_slots_of_every_card(run_stack_program: Run, prod_config, pci_tables):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    gate = run_stack_program(prod_config).named("dc1-gpu-ready").inputs
    assert gate["environment"]["GPU_SLOTS"] == "8"


def test_each_card_has_a_smoke_test_of_its_own_that_names_only_the_card_it_ran_on(
    run_stack_program: Run, prod_config, pci_tables
):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    recording = run_stack_program(prod_config)
    jobs = [recording.named(name).inputs for name in ("dc1-cuda-smoke-test", "dc1-cuda-smoke-test-1")]
    notes = [job["metadata"]["annotations"]["gpu-pool/validated-device"] for job in jobs]
    assert notes == ["10de:25b0@pve-dc1/0000:01:00", "10de:25b0@pve-dc1/0000:02:00"]
    for card, job in enumerate(jobs):
        (container,) = job["spec"]["template"]["spec"]["containers"]
        # Every slot of the node, so every card is visible; CUDA picks this Job's card by PCI bus order.
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert container["env"] == [
            {"name": "CUDA_DEVICE_ORDER", "value": "PCI_BUS_ID"},
            {"name": "CUDA_VISIBLE_DEVICES", "value": str(card)},
        ]
    # One at a time (each holds every slot), both after the gate that waits for both cards' slots.
    assert recording.urn_of("dc1-cuda-smoke-test") in recording.named("dc1-cuda-smoke-test-1").dependencies
    gate = recording.named("dc1-gpu-ready").inputs["environment"]
    assert gate["SMOKE_JOB"] == ",".join(job["metadata"]["name"] for job in jobs)
    assert recording.urn_of("dc1-cuda-smoke-test-1") in recording.named("dc1-rollout").dependencies


def test_the_power_cycle_tracks_the_devices_behind_every_mapping(run_stack_program: Run, prod_config, pci_tables):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    environment = run_stack_program(prod_config).named("dc1-power-cycle").inputs["environment"]
    assert [entry["path"] for entry in json.loads(environment["MAPPED_DEVICE"])] == ["0000:01:00", "0000:02:00"]


def test_preflight_checks_every_card_and_reports_each(run_stack_program: Run, prod_config, pci_tables):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = two_card_host()
    report = run_stack_program(prod_config).stack_outputs["failureDomains"]["dc1"]["preflight"]
    assert "0000:01:00.0, 0000:01:00.1, IOMMU group 14" in report
    assert "0000:02:00.0, 0000:02:00.1, IOMMU group 15" in report


def test_preflight_refuses_the_second_card_when_it_is_not_on_the_host(
    run_stack_program: Run, prod_config, pci_tables, monitor
):
    two_cards(prod_config)
    pci_tables["pve-dc1"] = ms01_host()
    with pytest.raises(pulumi.RunError, match=r"domain dc1 \(node pve-dc1\): no PCI device at 0000:02:00"):
        run_stack_program(prod_config)


def test_preflight_refuses_the_second_card_when_its_group_holds_another_endpoint(
    run_stack_program: Run, prod_config, pci_tables
):
    two_cards(prod_config)
    nic = device("0000:03:00.0", "8086", "125c", 15, subsystem="8086:0000", name="I226-V")
    pci_tables["pve-dc1"] = [*two_card_host(), nic]
    with pytest.raises(pulumi.RunError, match=r"0000:02:00.0 shares IOMMU group 15 with 0000:03:00.0"):
        run_stack_program(prod_config)


def test_two_cards_of_one_domain_may_share_an_iommu_group_since_both_go_into_the_same_vm(
    run_stack_program: Run, prod_config, pci_tables
):
    two_cards(prod_config, group=14)
    pci_tables["pve-dc1"] = two_card_host(group=14)
    assert run_stack_program(prod_config).stack_outputs["failureDomains"]["dc1"]["preflight"].startswith("passed")


def test_the_host_check_reads_the_driver_of_every_card(prod_config):
    domain = FailureDomainConfig.model_validate(two_cards(prod_config))
    problems = host_check_problems(domain, "vfio-pci\nnvidia\n24\n")
    assert problems == [
        "domain dc1 (node pve-dc1): 0000:02:00 is bound to 'nvidia' on the host, not vfio-pci "
        "(bind it with vfio-pci ids=... and blacklist nouveau/nvidia on the host)"
    ]


def test_mixed_models_with_time_slicing_are_refused_naming_the_domain(run_stack_program: Run, prod_config, monitor):
    two_cards(prod_config, vendorDeviceId="10de:2882", model="NVIDIA GeForce RTX 4060")
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1].gpus: mixed models (10de:25b0, 10de:2882)" in message
    assert "replicas: 1" in message


def test_mixed_models_are_accepted_as_whole_cards(run_stack_program: Run, prod_config, pci_tables):
    # dc3 uses the `whole` profile: each pod gets a whole card of either model.
    two_cards(prod_config, 2, vendorDeviceId="10de:2882", model="NVIDIA GeForce RTX 4060")
    pci_tables["pve-dc3"] = [*ms01_host(), device("0000:02:00.0", "10de", "2882", 15, name="RTX 4060")]
    assert run_stack_program(prod_config).stack_outputs["failureDomains"]["dc3"]["gpuSlots"] == 2


def test_the_same_card_listed_twice_is_refused(run_stack_program: Run, prod_config, monitor):
    two_cards(prod_config, at="0000:01:00.0", group=14)
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1].gpus[1].pciAddress: '0000:01:00.0' is the card already listed as gpus[0]" in (
        message
    )


def test_a_domain_with_both_gpu_and_gpus_is_refused(run_stack_program: Run, prod_config, monitor):
    domain = prod_config[FD][0]
    domain["gpus"] = [domain["gpu"]]
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1]" in message and "gives both gpu and gpus" in message


def test_a_domain_without_a_card_is_refused_pointing_at_discover(run_stack_program: Run, prod_config, monitor):
    del prod_config[FD][0]["gpu"]
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1]" in message and "names no card" in message


def test_an_empty_list_of_cards_is_refused(run_stack_program: Run, prod_config, monitor):
    prod_config[FD][0]["gpus"] = []
    del prod_config[FD][0]["gpu"]
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1].gpus" in message


def test_two_gpu_domains_on_one_host_stay_refused_saying_why(run_stack_program: Run, prod_config, monitor):
    prod_config[FD][1]["proxmoxNode"] = prod_config[FD][0]["proxmoxNode"]
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc2].proxmoxNode: 'pve-dc1' is already used by failureDomains[dc1]" in message
    assert "two GPU domains on one host both die with it" in message


def test_the_shipped_minimal_stack_has_a_two_card_host_and_a_one_card_host() -> None:
    from offline.runner import read_stack_file

    root = Path(__file__).resolve().parents[2]
    domains = [FailureDomainConfig.model_validate(d) for d in read_stack_file("minimal", root)[FD]]
    assert [len(d.cards) for d in domains] == [2, 1]
