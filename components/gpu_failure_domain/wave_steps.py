"""A domain's turn in a day-2 wave (rollout.py): the steps registered only in the `up` that rolls a change."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pulumi
import pulumi_command as command

from components.gpu_failure_domain.kernel_upgrade import login_check_command
from components.gpu_failure_domain.node_steps import (
    INTERPRETER,
    gpu_ready_environment,
    node_steps_script,
)
from components.gpu_failure_domain.rollout import (
    device_plugin_restart_command,
    rke2_upgrade_command,
    rollout_state,
    wave_drain_command,
)

if TYPE_CHECKING:
    from components.gpu_failure_domain.component import GpuFailureDomainArgs


def wave_steps(
    parent: pulumi.Resource, name: str, args: GpuFailureDomainArgs, kubectl: str, vm: pulumi.Resource
) -> list[pulumi.Resource]:
    """This domain's turn in a day-2 wave: drain once the previous batch is done, then the changes that need
    the node drained (the RKE2 agent upgrade, the device plugin restart). Registered only in the `up` that
    rolls them; the next `up` deletes them (no delete command: deleting them does nothing)."""
    domain, stack = args.domain, args.stack
    target = json.dumps(rollout_state(domain, stack), sort_keys=True)
    local = pulumi.ResourceOptions(parent=parent)
    before_drain: list[pulumi.Resource] = [*args.wave_after, vm]
    if "rke2" in args.wave_changes:
        # The SSH login the upgrade needs is proven before the drain, not found missing after it.
        before_drain.append(
            command.remote.Command(
                f"{name}-rke2-login",
                connection=connection(args),
                create=login_check_command(),
                triggers=[stack.rke2.version],
                opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=list(before_drain))),
            )
        )
    drain = command.local.Command(
        f"{name}-wave-drain",
        create=wave_drain_command(domain.hostname, kubectl, domain.name),
        interpreter=["/bin/sh", "-c"],
        triggers=[target],
        opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=before_drain)),
    )
    steps: list[pulumi.Resource] = [drain]
    if "rke2" in args.wave_changes:
        steps.append(
            command.remote.Command(
                f"{name}-rke2-upgrade",
                connection=connection(args),
                create=rke2_upgrade_command(stack.rke2.version),
                triggers=[stack.rke2.version],
                opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[drain])),
            )
        )
    if "sharing" in args.wave_changes:
        steps.append(
            command.local.Command(
                f"{name}-device-plugin-restart",
                create=device_plugin_restart_command(domain.hostname, kubectl, stack.gpu_operator.namespace),
                interpreter=["/bin/sh", "-c"],
                triggers=[target],
                opts=pulumi.ResourceOptions.merge(
                    local, pulumi.ResourceOptions(depends_on=[drain, args.platform.time_slicing_config])
                ),
            )
        )
    return steps


def wave_gate(
    parent: pulumi.Resource,
    name: str,
    args: GpuFailureDomainArgs,
    kubectl_args: list[str],
    after: list[pulumi.Resource],
) -> list[pulumi.Resource]:
    """The wave's gate on this domain: Ready at the pinned kubelet, its slots on the pinned driver."""
    domain, stack = args.domain, args.stack
    gate = command.local.Command(
        f"{name}-wave-gate",
        create=node_steps_script(),
        interpreter=INTERPRETER,
        environment=gpu_ready_environment(
            domain, stack, kubectl_args, KUBELET_VERSION=stack.rke2.version, WAVE_DOMAIN=domain.name
        ),
        triggers=[json.dumps(rollout_state(domain, stack), sort_keys=True)],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*after, args.platform.operator]),
    )
    return [*after, gate]


def connection(args: GpuFailureDomainArgs) -> command.remote.ConnectionArgs:
    domain = args.domain
    host = domain.network.ipv4.split("/")[0] if domain.network.ipv4 != "dhcp" else domain.hostname
    # Without a key, pulumi-command's SSH client uses the ssh-agent (SSH_AUTH_SOCK).
    return command.remote.ConnectionArgs(host=host, user=domain.username, private_key=args.ssh_private_key)
