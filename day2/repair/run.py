"""`gpu-pool repair --yes`: the repair's turn run step by step, each as pulumi-command runs it.

A local step is `<interpreter...> <create>` with this process's environment plus the step's own (and the Proxmox
credential where the step takes it, as the stack's `up` adds it); a remote step is `<create>` on the VM over SSH
with the stack's login user and key (pulumi-command's remote.Command, with the OpenSSH client). The first step
that fails stops the repair: the node stays cordoned with its turn in progress, the stop is recorded on the Node
(gpu-pool.dev/repairs and an Event) and the command to resume is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from components.gpu_failure_domain.node_metadata import ssh_host
from components.gpu_failure_domain.plan import CommandStep, DomainPlan, Step
from components.shared.kubectl import kubectl_argv
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig
from node.kube import Kube, Kubectl
from node.turn import Turn, stop
from node.vocabulary import stamp
from node.waiting import StepFailed

# The ssh client the repair reaches the VM with (a command line; default `ssh`, reading ~/.ssh/config as usual).
SSH_ENV = "GPU_POOL_SSH"
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "StrictHostKeyChecking=accept-new")


@dataclass(frozen=True)
class Inputs:
    stack: StackConfig
    domain: FailureDomainConfig
    secrets: dict[str, str]
    # The stack's SSH key in a file (key_file), or None: ssh's agent and ~/.ssh.
    key_file: Path | None


def ssh_argv(domain: FailureDomainConfig, key: Path | None) -> list[str]:
    """ssh to the VM as pulumi-command's remote steps log in: the domain's user at its address."""
    program = shlex.split(os.environ.get(SSH_ENV) or "ssh")
    identity = ["-i", str(key), "-o", "IdentitiesOnly=yes"] if key else []
    return [*program, *SSH_OPTIONS, *identity, f"{domain.username}@{ssh_host(domain)}"]


@contextlib.contextmanager
def key_file(private_key: str | None) -> Iterator[Path | None]:
    """The stack's SSH key (the secret sshPrivateKey) in a file only this user reads, for `ssh -i`; None without
    one (then ssh uses the agent and ~/.ssh as usual). Removed when the block ends."""
    if not private_key:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gpu-pool-repair-") as folder:
        path = Path(folder) / "id"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(private_key.rstrip("\n") + "\n")
        yield path


def step_argv(step: Step, inputs: Inputs) -> list[str]:
    assert isinstance(step, CommandStep), f"{step.name} runs no command"
    if step.kind == "remote":
        return [*ssh_argv(inputs.domain, inputs.key_file), step.command.create]
    return [*(step.command.interpreter or ()), step.command.create]


def step_environment(step: Step, credential: Mapping[str, str], allow_ha: bool = False) -> dict[str, str]:
    assert isinstance(step, CommandStep), f"{step.name} runs no command"
    environment = {**os.environ}
    if step.kind == "local":
        environment.update(step.command.environment)
        if step.command.proxmox_credentials:
            environment.update(credential)
            if allow_ha:
                # repair.allowHaManaged: the stop and start go through HA; the step checks where the VM runs after.
                environment["POWER_CYCLE_HA"] = "1"
    return environment


def run_step(step: Step, inputs: Inputs, credential: Mapping[str, str], out: TextIO) -> tuple[int, str]:
    """Runs one step, its output copied to `out` as it comes; (exit code, its last line)."""
    last = ""
    process = subprocess.Popen(
        step_argv(step, inputs),
        env=step_environment(step, credential, inputs.stack.repair.allow_ha_managed),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        out.write(f"    {line}")
        out.flush()
        last = line.strip() or last
    return process.wait(), last


def resume_command(inputs: Inputs, args: argparse.Namespace) -> str:
    where = f" --stack-dir {args.stack_dir}" if args.stack_dir != "." else ""
    return f"gpu-pool repair {inputs.domain.hostname} --stack {args.stack}{where} --yes"


def _record_stop(inputs: Inputs, step: Step, error: str, resume: str, holder: str, out: TextIO) -> None:
    """The stop on the Node (node/turn.py stop, as a wave's failed drain or gate writes it): what a later look at it
    (`kubectl describe node`, the next repair) reads. Still the repair's hold: `pulumi up` refuses the node until
    the repair is run again to its end."""
    kube = Kube(
        Kubectl(kubectl_argv(inputs.stack.kubernetes.kubeconfig, inputs.stack.kubernetes.context)),
        component="gpu-pool-repair",
    )
    turn = Turn(kube, inputs.domain.hostname, holder, inputs.domain.name)
    now = stamp(datetime.datetime.now(datetime.UTC))
    why = f"repair stopped at {step.name} at {now}: {error}; resume: {resume}"
    entry = {"event": "stopped", "step": step.name, "reason": error, "resume": resume}
    try:
        stop(turn, why, entry)
        node = kube.node(inputs.domain.hostname) or {"metadata": {"name": inputs.domain.hostname}}
        kube.event(node, "Warning", "GpuPoolRepairStopped", f"gpu-pool repair stopped at {step.name}: {error}")
    except StepFailed as failure:
        out.write(f"  (the stop could not be recorded on the Node: {failure})\n")


def execute(
    plan: DomainPlan,
    inputs: Inputs,
    credential: Mapping[str, str],
    args: argparse.Namespace,
    out: TextIO,
    holder: str,
) -> int:
    node = inputs.domain.hostname
    steps = plan.turn_steps()
    for index, step in enumerate(steps, start=1):
        out.write(f"==> [{index}/{len(steps)}] {step.name}: {step.does}\n")
        out.flush()
        code, last = run_step(step, inputs, credential, out)
        if code == 0:
            continue
        error = last or f"exit {code}"
        resume = resume_command(inputs, args)
        _record_stop(inputs, step, error, resume, holder, out)
        drained = any(s.name == "wave-drain" for s in steps[: index - 1]) or step.name != "wave-drain"
        state = (
            f"{node} stays cordoned with its turn in progress"
            if drained
            else f"{node} may be cordoned (the drain stopped)"
        )
        out.write(
            f"gpu-pool repair: stopped at {step.name} (exit {code}): {error}\n"
            f"  {state}; nothing after {step.name} ran, and the stop is recorded on the Node "
            f"(annotations gpu-pool.dev/wave-stopped and gpu-pool.dev/repairs, Event GpuPoolRepairStopped).\n"
            f"  resume: fix the cause, then `{resume}` (it decides again: a card still faulted is power-cycled "
            f"again, within gpu-pool:repair.maxPerDay), or, once the card is fine, `pulumi up --stack {args.stack}`, "
            "which finishes the turn: gate, then uncordon\n"
        )
        return 1
    out.write(f"gpu-pool repair: {node} repaired ({plan.turn.reason})\n")
    return 0
