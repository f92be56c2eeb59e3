"""The node steps' other paths against the real API server: waiting, taking a label over, a drained power cycle."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from components.gpu_failure_domain.node_metadata import node_labels
from components.gpu_failure_domain.observed import WAVE_CORDON_ANNOTATION, WAVE_TURN_ANNOTATION
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import registered_nodes, set_status
from tests.e2e.stacks import Previewed
from tests.e2e.steps import StepRunner
from tests.gpu_failure_domain.node_steps_harness import FakeProxmox, Journal
from tests.loopback import serving

PENDING = [{"key": "hostpci0", "value": "mapping=gpu-dc1,pcie=1", "pending": "mapping=gpu-dc1,pcie=1,rombar=1"}]
# Fast polls, and a short deadline so a regression fails here instead of waiting the production 30 minutes.
QUICK = {"GPU_POOL_POLL_SECONDS": "0.1", "GPU_POOL_PROGRESS_SECONDS": "0"}


@pytest.fixture
def prod(prod_stack: Previewed, step_runner_for: Callable[[Previewed], StepRunner]) -> StepRunner:
    return step_runner_for(prod_stack)


@pytest.mark.parametrize(
    ("registered", "seen"), [(False, "not registered"), (True, "registered, not Ready")], ids=["absent", "not-ready"]
)
def test_node_ready_waits_for_the_node_and_names_what_it_last_saw_when_it_times_out(
    prod: StepRunner, kubectl: Kubectl, registered: bool, seen: str
) -> None:
    domain = prod.stack.config.failure_domains[0]
    with registered_nodes(kubectl, prod.stack, ready=False, only=domain) if registered else contextlib.nullcontext():
        done = prod.command(f"{domain.name}-node-ready", TIMEOUT_MINUTES="0.01", **QUICK)
    assert done.returncode == 1
    assert f"waiting for node {domain.hostname} to register and be Ready" in done.stdout
    assert f"Last seen: {seen}" in done.stderr


def test_the_label_step_takes_over_a_sharing_profile_label_someone_else_set(prod: StepRunner, kubectl: Kubectl) -> None:
    domain = prod.stack.config.failure_domains[0]
    with registered_nodes(kubectl, prod.stack, only=domain):
        kubectl("label", "node", domain.hostname, f"{DEVICE_PLUGIN_CONFIG_LABEL}=whole", "--overwrite")
        # Without forcing, server-side apply refuses a label another manager owns: hence pulumi.com/patchForce.
        refused = kubectl.run(
            "apply", "--server-side", "--field-manager=pulumi-kubernetes", "-f", str(prod.node_patch(domain))
        )
        assert refused.returncode != 0 and "conflict" in refused.stderr.lower()
        assert kubectl.server_side_apply(prod.node_patch(domain), dry_run=False).returncode == 0
        labels = kubectl.json("get", "node", domain.hostname)["metadata"]["labels"]
    assert labels[DEVICE_PLUGIN_CONFIG_LABEL] == node_labels(domain)[DEVICE_PLUGIN_CONFIG_LABEL] == "a1000-x4"


class VmJournal(Journal):
    """The fake Proxmox API's journal; each call also plays what the real VM does meanwhile."""

    def __init__(self, path: Path, kubectl: Kubectl, node: str) -> None:
        super().__init__(path)
        self.kubectl, self.node = kubectl, node
        self.cordoned_at_shutdown: bool | None = None
        self.errors: list[BaseException] = []

    def write(self, line: str) -> None:
        super().write(line)
        try:
            if line.endswith("/status/shutdown"):
                spec = self.kubectl.json("get", "node", self.node)["spec"]
                self.cordoned_at_shutdown = bool(spec.get("unschedulable"))
            elif line.endswith("/status/start"):
                # The VM boots, its kubelet reports Ready from a new boot: before Proxmox even answers the start.
                set_status(self.kubectl, self.node, ready=True, boot_id="dc1-boot-2")
        except BaseException as error:  # the HTTP server thread would swallow it
            self.errors.append(error)


def test_a_power_cycle_drains_the_node_before_the_stop_and_uncordons_it_once_it_rebooted(
    prod: StepRunner, kubectl: Kubectl, tmp_path: Path
) -> None:
    domain = prod.stack.config.failure_domains[0]
    environment = prod.stack.resource(f"{domain.name}-power-cycle")["inputs"]["environment"]
    journal = VmJournal(tmp_path / "journal.log", kubectl, domain.hostname)
    api = FakeProxmox(journal, PENDING)
    with serving(api.server), registered_nodes(kubectl, prod.stack, only=domain):
        done = prod.command(
            f"{domain.name}-power-cycle",
            PROXMOX_ENDPOINT=api.endpoint,
            PROXMOX_API_TOKEN="pulumi@pve!gpu-pool=e2e",
            TIMEOUT_MINUTES="1",
            **QUICK,
        )
        node = kubectl.json("get", "node", domain.hostname)
    assert not journal.errors
    assert done.returncode == 0, done.stdout + done.stderr
    vm = f"/api2/json/nodes/{domain.proxmox_node}/qemu/{domain.vm_id}"
    assert journal.lines() == [
        f"proxmox GET {vm}/pending",
        f"proxmox POST {vm}/status/shutdown",
        f"proxmox POST {vm}/status/start",
    ]
    assert journal.cordoned_at_shutdown is True
    assert not node["spec"].get("unschedulable")
    assert node["status"]["nodeInfo"]["bootID"] == "dc1-boot-2"
    assert done.stdout.endswith(f"applied-device: {environment['MAPPED_DEVICE']}\n")


def test_a_kernel_upgrade_cordons_and_drains_the_node_first_and_only_the_domains_last_step_uncordons_it(
    options_stack: Previewed, step_runner_for: Callable[[Previewed], StepRunner], kubectl: Kubectl
) -> None:
    # The options stack pins dc1's kernel on a new worker; the SSH install and the driver rebuild between need a VM.
    runner = step_runner_for(options_stack)
    domain = next(domain for domain in options_stack.config.failure_domains if domain.kernel)
    with registered_nodes(kubectl, options_stack, only=domain):
        drained = runner.command(f"{domain.name}-kernel-drain")
        cordoned = kubectl.json("get", "node", domain.hostname)
        done = runner.command(f"{domain.name}-rollout")
        after = kubectl.json("get", "node", domain.hostname)
    assert drained.returncode == 0, drained.stderr
    assert f"node/{domain.hostname} drained" in drained.stdout
    assert cordoned["spec"]["unschedulable"] is True
    assert cordoned["metadata"]["annotations"][WAVE_CORDON_ANNOTATION] == domain.name
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{domain.hostname}: rolled out, serving\n"
    assert not after["spec"].get("unschedulable")
    assert WAVE_CORDON_ANNOTATION not in after["metadata"]["annotations"]
    assert WAVE_TURN_ANNOTATION not in after["metadata"]["annotations"]


def test_a_node_someone_else_cordoned_stays_cordoned_after_the_domains_last_step(
    options_stack: Previewed, step_runner_for: Callable[[Previewed], StepRunner], kubectl: Kubectl
) -> None:
    runner = step_runner_for(options_stack)
    domain = next(domain for domain in options_stack.config.failure_domains if domain.kernel)
    with registered_nodes(kubectl, options_stack, only=domain):
        kubectl("cordon", domain.hostname)
        drained = runner.command(f"{domain.name}-kernel-drain")
        marked = kubectl.json("get", "node", domain.hostname)["metadata"].get("annotations") or {}
        done = runner.command(f"{domain.name}-rollout")
        after = kubectl.json("get", "node", domain.hostname)
    assert drained.returncode == 0 and done.returncode == 0, drained.stderr + done.stderr
    assert WAVE_CORDON_ANNOTATION not in marked and marked[WAVE_TURN_ANNOTATION]
    assert after["spec"]["unschedulable"] is True
    assert WAVE_TURN_ANNOTATION not in after["metadata"]["annotations"]
    assert "cordoned by someone else before the wave, left cordoned" in done.stdout
