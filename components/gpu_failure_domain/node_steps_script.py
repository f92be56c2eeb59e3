"""gpu-pool's steps on one GPU worker, run by pulumi-command (and `gpu-pool repair`) as `python3 -c <bootstrap>`,
the bootstrap carrying this module and node/ packed as one zip (components/gpu_failure_domain/node_steps.py). A
driver only: every act on the Node is a transition of node/ (node/turn.py and its neighbours), the same ones the
watcher runs. `GPU_POOL_STEP` picks the step:

- `node-ready`: wait until the node has registered with RKE2 and is Ready.
- `gpu-ready`: wait until the node advertises the GPU slots its sharing profile promises, the operator's
  driver upgrade on it is done, and its driver pod runs the pinned driver (the smoke test starts after it).
- `power-cycle`: apply the VM's pending Proxmox changes (q35, hostpci, cores, memory...) or a moved card with a
  full stop and start, never a guest reboot, with the node drained first and uncordoned once Ready again.
- `kernel-rebuild`: wait until the node is back on the pinned kernel, then rebuild the driver on it.
- `smoke-test`: create a smoke Job (`gpu-pool repair` runs the domain's test again under a new name) and wait
  until it completes or fails.
- `repair-done`: a repair's last step, after its checks: one patch ends the turn, uncordons the node where the
  drain cordoned it and records the repair on the Node; an Event says so.
- `drain`: a turn's start: take the node's hold, stop if it is not Ready, hold the GPU Operator off it (its skip
  label), cordon it (with the operator's initial-state mark), drain it by `kubectl drain`'s rules, release the
  operator.
- `rollout`: a wave turn's last step, after its gate: one patch records the state rolled to and ends the turn,
  uncordoning the node where the turn cordoned it.

With POWER_CYCLE_REASON set (`gpu-pool repair`), `power-cycle` stops and starts the VM whatever is pending, and
records the power cycle on the Node (gpu-pool.dev/repairs, which the repair's daily budget counts) and as an Event
once the stop task ended and the VM is stopped (node/power.py). A stopped VM is only started. With POWER_CYCLE_HA
(an HA-managed VM, allowed by `repair.allowHaManaged`) the VM must run on PROXMOX_NODE afterwards. A Proxmox error
is one line with PVE's message.

Every wait prints a line at least once a minute with what it is waiting for and the last API error, and its
timeout names the likeliest cause.

Environment: GPU_POOL_STEP, NODE_NAME, KUBECTL (JSON argv prefix, e.g. ["kubectl", "--context", "lab"]),
TIMEOUT_MINUTES; gpu-ready: GPU_SLOTS, DRIVER_VERSION, OPERATOR_NAMESPACE (and, a wave's gate: KUBELET_VERSION,
WAVE_DOMAIN); kernel-rebuild: KERNEL, OPERATOR_NAMESPACE; power-cycle: PROXMOX_ENDPOINT, PROXMOX_NODE,
PROXMOX_VMID, PROXMOX_INSECURE, PROXMOX_API_TOKEN or PROXMOX_ROOT_PASSWORD, MAPPED_DEVICE, PULUMI_COMMAND_STDOUT
(what the previous run printed), POWER_CYCLE_REASON; smoke-test: SMOKE_JOB (the Job, JSON); repair-done:
REPAIR_REASON; drain: TURN_HOLDER, TURN_DOMAIN; rollout: ROLLOUT_STATE (JSON). GPU_POOL_POLL_SECONDS and
GPU_POOL_PROGRESS_SECONDS tune the pace (10 and 60).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from node.drain import drain
from node.gate import Pins, gate, note_driver_revision, rebuild_driver
from node.jobs import smoke_test
from node.kube import Kube, Kubectl
from node.power import Charge, Vm, power_cycle
from node.proxmox import Proxmox
from node.turn import (
    Turn,
    cordon_plain,
    finish_repair,
    finish_rollout,
    start,
    stop,
    uncordon_plain,
    wait_ready,
)
from node.vocabulary import boot_id, ours_cordoned, stamp, unschedulable
from node.waiting import StepFailed

APPLIED_DEVICE = "applied-device: "
EVENT_SOURCE = "gpu-pool-repair"
# How long a drain may wait for pods to leave (config/rollout.py DRAIN_TIMEOUT_SECONDS; a test keeps them equal).
DRAIN_MINUTES = 15


def env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise StepFailed(f"{name} is not set")
    return value


def previous_device(previous_stdout: str) -> str | None:
    for line in previous_stdout.splitlines():
        if line.startswith(APPLIED_DEVICE):
            return line[len(APPLIED_DEVICE) :]
    return None


# ---------------------------------------------------------------------------------------------------- steps


def step_node_ready(turn: Turn, minutes: float) -> None:
    wait_ready(turn, minutes)


def step_gpu_ready(turn: Turn, minutes: float) -> None:
    pins = Pins(
        int(env("GPU_SLOTS")),
        env("DRIVER_VERSION"),
        env("OPERATOR_NAMESPACE"),
        os.environ.get("KUBELET_VERSION", ""),
        fresh_driver=bool(os.environ.get("FRESH_DRIVER")),
    )
    gate(turn, pins, minutes, in_turn=bool(os.environ.get("WAVE_DOMAIN")))


def step_kernel_rebuild(turn: Turn, minutes: float) -> None:
    rebuild_driver(turn, env("KERNEL"), env("OPERATOR_NAMESPACE"), minutes)


def step_smoke_test(turn: Turn, minutes: float) -> None:
    smoke_test(turn, json.loads(env("SMOKE_JOB")), minutes)


def step_drain(turn: Turn, minutes: float) -> None:
    namespace = os.environ.get("OPERATOR_NAMESPACE")
    start(
        turn,
        stamp(turn.clock()),
        minutes,
        before_cordon=(lambda held: note_driver_revision(held, namespace)) if namespace else None,
    )


def step_rollout(turn: Turn, minutes: float) -> None:
    turn.say(finish_rollout(turn, json.loads(env("ROLLOUT_STATE"))))


def step_repair_done(turn: Turn, minutes: float) -> None:
    reason = env("REPAIR_REASON")
    node = finish_repair(turn, {"event": "repaired", "reason": reason})
    left = unschedulable(node) and not ours_cordoned(node)
    end = "left cordoned: someone else cordoned it before the repair" if left else "serving"
    turn.kube.event(node, "Normal", "GpuPoolRepaired", f"gpu-pool repair: {reason}; checked again, {end}")
    turn.say(f"{turn.node}: repaired, {end}")


def step_power_cycle(turn: Turn, minutes: float) -> None:
    vm = Vm(env("PROXMOX_VMID"), env("PROXMOX_NODE"))
    device = env("MAPPED_DEVICE", "")
    pve = Proxmox(env("PROXMOX_ENDPOINT"), env("PROXMOX_INSECURE", "false") == "true")
    pve.login(os.environ.get("PROXMOX_API_TOKEN"), os.environ.get("PROXMOX_ROOT_PASSWORD"))
    forced = os.environ.get("POWER_CYCLE_REASON", "")
    keys = pve.pending(vm.path)
    if forced:
        # `gpu-pool repair`: the card faulted; a cold start resets it whatever the VM's config says. It also
        # applies what Proxmox has pending for the VM (a stack change not rolled yet): said, so it is no surprise.
        also = f"; it also applies what Proxmox has pending: {', '.join(keys)}" if keys else ""
        turn.say(f"VM {vm.vmid}: {forced}; full power cycle (stop, then start){also}")
    else:
        before = previous_device(os.environ.get("PULUMI_COMMAND_STDOUT", ""))
        # A mapping that now points at another slot changes nothing in the VM's config: only a cold start hands
        # the guest the new device, so a changed mapping counts as pending too.
        reasons = keys + (["the mapped PCI device"] if before is not None and before != device else [])
        if not reasons:
            turn.say(f"VM {vm.vmid}: nothing pending, no power cycle")
            turn.say(APPLIED_DEVICE + device)
            return
        turn.say(f"VM {vm.vmid}: {', '.join(reasons)} changed; drain, full power cycle (stop, then start), uncordon")
    node = turn.kube.node(turn.node)
    was_cordoned = False
    if node is not None:
        # Never an undrained reboot: GPU pods are evicted (their PodDisruptionBudgets respected) first.
        was_cordoned = cordon_plain(turn)
        drain(turn.kube, turn.node, DRAIN_MINUTES, turn.out, turn.tick)
    else:
        turn.say(f"node {turn.node} is not registered: nothing to drain")
    charge = Charge(forced) if forced else None
    power_cycle(turn, pve, vm, charge, ha=bool(os.environ.get("POWER_CYCLE_HA")))
    if node is not None:
        wait_ready(turn, minutes, boot_id(node))
        if not was_cordoned:
            uncordon_plain(turn)
        else:
            turn.say(f"node {turn.node} was cordoned before the power cycle: left cordoned")
    turn.say(APPLIED_DEVICE + device)


STEPS: dict[str, Callable[[Turn, float], None]] = {
    "node-ready": step_node_ready,
    "gpu-ready": step_gpu_ready,
    "power-cycle": step_power_cycle,
    "kernel-rebuild": step_kernel_rebuild,
    "smoke-test": step_smoke_test,
    "repair-done": step_repair_done,
    "drain": step_drain,
    "rollout": step_rollout,
}


def the_turn() -> Turn:
    kube = Kube(Kubectl(json.loads(env("KUBECTL", '["kubectl"]'))), component=EVENT_SOURCE)
    return Turn(
        kube,
        env("NODE_NAME"),
        os.environ.get("TURN_HOLDER", "up"),
        os.environ.get("TURN_DOMAIN") or os.environ.get("WAVE_DOMAIN", ""),
        sys.stdout,
    )


def main() -> int:
    turn: Turn | None = None
    try:
        step = STEPS.get(env("GPU_POOL_STEP"))
        if step is None:
            raise StepFailed(f"unknown GPU_POOL_STEP {os.environ['GPU_POOL_STEP']!r}; one of {', '.join(STEPS)}")
        turn = the_turn()
        step(turn, float(env("TIMEOUT_MINUTES", "30")))
    except StepFailed as error:
        print(f"gpu-pool: {error}", file=sys.stderr)
        wave = os.environ.get("WAVE_DOMAIN")
        if wave and turn is not None:
            # The gate failed: the node stays cordoned and says why, for `kubectl describe node` and the next plan.
            try:
                stop(turn, f"gate {env('GPU_POOL_STEP')} failed at {stamp(turn.clock())}: {error}")
            except StepFailed as failure:
                print(f"gpu-pool: the stop could not be recorded on the Node: {failure}", file=sys.stderr)
            print(
                f"gpu-pool: the wave stopped at domain {wave} (gate {env('GPU_POOL_STEP')}): {wave} stays cordoned, "
                "the domains after it were not touched and still serve; fix the cause, then `pulumi up` resumes "
                f"the wave at {wave}",
                file=sys.stderr,
            )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
