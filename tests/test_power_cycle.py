"""The power-cycle step: it cycles the VM exactly when a passthrough setting is pending."""

from __future__ import annotations

from typing import Any

from components.power_cycle import power_cycle_script
from components.scripts.proxmox_power_cycle import pending_passthrough


def test_a_pending_hostpci_or_machine_change_needs_a_power_cycle():
    pending: list[dict[str, Any]] = [
        {"key": "hostpci0", "value": "mapping=gpu-dc1,pcie=1", "pending": "mapping=gpu-dc1,pcie=1,rombar=1"},
        {"key": "machine", "value": "pc", "pending": "q35"},
        {"key": "cores", "value": 8},
    ]
    assert pending_passthrough(pending) == ["hostpci0", "machine"]


def test_a_removed_hostpci_device_needs_a_power_cycle():
    assert pending_passthrough([{"key": "hostpci0", "value": "mapping=gpu-dc1", "delete": 1}]) == ["hostpci0"]


def test_settings_already_in_effect_or_other_keys_need_no_power_cycle():
    pending: list[dict[str, Any]] = [
        {"key": "hostpci0", "value": "mapping=gpu-dc1,pcie=1"},
        {"key": "machine", "value": "q35"},
        {"key": "memory", "value": 16384, "pending": 32768},
    ]
    assert pending_passthrough(pending) == []


def test_the_step_stops_the_vm_before_starting_it_never_a_guest_reboot():
    script = power_cycle_script()
    assert script.index("/status/shutdown") < script.index("/status/start")
    assert "/status/reboot" not in script
    compile(script, "proxmox_power_cycle.py", "exec")
