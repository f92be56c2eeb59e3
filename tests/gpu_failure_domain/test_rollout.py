"""The commands a day-2 turn runs on its VM over SSH and on its operands: what they run and restart. (The turn's
acts on the Node itself are node/'s transitions: tests/node/test_turn.py; they run for real against the e2e API
server in tests/e2e/test_wave.py.)"""

from __future__ import annotations

from components.gpu_failure_domain.rollout import device_plugin_restart_command, rke2_upgrade_command


def test_the_rke2_upgrade_is_the_official_installer_at_the_pin_then_an_agent_restart() -> None:
    command = rke2_upgrade_command("v1.33.6+rke2r1")
    assert command.startswith("set -e; curl -sfL https://get.rke2.io -o /tmp/install-rke2.sh; ")
    assert "sudo INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION=v1.33.6+rke2r1 sh /tmp/install-rke2.sh" in command
    assert command.index("sh /tmp/install-rke2.sh") < command.index("systemctl restart rke2-agent")


def test_a_profile_edit_restarts_gpu_feature_discovery_with_the_device_plugin_on_that_node_only() -> None:
    """FIELD-REVIEW-4 WRONG-5: GFD's config-manager, like the plugin's, rereads the profile only when it starts."""
    command = device_plugin_restart_command("n1", "kubectl", "gpu-operator")
    assert command == (
        "kubectl -n gpu-operator delete pod -l 'app in (nvidia-device-plugin-daemonset,gpu-feature-discovery)' "
        "--field-selector spec.nodeName=n1 --wait=true --timeout=5m"
    )
