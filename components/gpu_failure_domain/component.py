"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker, joined, labelled and tainted.

The component registers its plan (plan.py) and nothing else: which steps exist, what each runs, what it waits for,
its arguments and its resource options are decided there, as data (steps.py). One `match` registers each kind of
step and ends in `assert_never`: a new kind without its branch fails mypy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

import pulumi
import pulumi_command as command
import pulumi_kubernetes.provider
import pulumi_proxmoxve as proxmoxve

from components.gpu_failure_domain.plan import DomainPlan
from components.gpu_failure_domain.steps import (
    CloudInitStep,
    Command,
    LocalStep,
    NodeLabelsStep,
    PciMappingStep,
    PlatformWait,
    RemoteStep,
    SmokeJobStep,
    Step,
    VmStep,
)
from components.shared.kubernetes_objects import register_node_patch, register_object
from components.shared.platform_handles import PlatformHandles
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig

TYPE_TOKEN = "gpu-pool:proxmox:GpuFailureDomain"


@dataclass(frozen=True)
class GpuFailureDomainArgs:
    domain: FailureDomainConfig
    stack: StackConfig
    plan: DomainPlan
    rke2_token: pulumi.Output[str]
    proxmox_credential_env: dict[str, pulumi.Output[str]]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: pulumi_kubernetes.provider.Provider
    platform: PlatformHandles
    # gpu-pool:registryAuth (registries.yaml's `configs`), where the stack sets it.
    registry_auth: pulumi.Output[str] | None = None
    # gpu-pool:proxyAuth (with proxy.login): into the snippet and the files turn's standard input only.
    proxy_auth: pulumi.Output[str] | None = None
    # The key the remote steps log in to the VM with; None uses the ssh-agent (SSH_AUTH_SOCK).
    ssh_private_key: pulumi.Output[str] | None = None
    # The previous batch's last steps, which this domain's turn waits for (empty: no wait across domains).
    wave_after: tuple[pulumi.Resource, ...] = ()


class GpuFailureDomain(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    vm_id: pulumi.Output[int]
    zone: pulumi.Output[str]
    sharing_profile: pulumi.Output[str]
    gpu_slots: pulumi.Output[int]
    rollout_done: pulumi.Resource

    def __init__(self, name: str, args: GpuFailureDomainArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._args = args
        self._registered: dict[str, pulumi.Resource] = {}
        for step in args.plan.steps:
            self._registered[step.name] = self._register(step)
        self.rollout_done = self._registered["rollout"]

        domain, stack = args.domain, args.stack
        self.node_name = pulumi.Output.from_input(domain.hostname)
        self.vm_id = pulumi.Output.from_input(domain.vm_id)
        self.zone = pulumi.Output.from_input(domain.name)
        self.sharing_profile = pulumi.Output.from_input(domain.sharing)
        self.gpu_slots = pulumi.Output.from_input(stack.slots(domain))
        self.register_outputs(
            {
                "nodeName": self.node_name,
                "vmId": self.vm_id,
                "zone": self.zone,
                "sharingProfile": self.sharing_profile,
                "gpuSlots": self.gpu_slots,
            }
        )

    def _platform(self, wait: PlatformWait) -> pulumi.Resource | None:
        handles = self._args.platform
        return {
            "time-slicing-config": handles.time_slicing_config,
            "operator": handles.operator,
            "smoke-namespace": handles.smoke_namespace,
            "steering-policy": handles.steering_policy,
        }[wait]

    def _options(self, step: Step, provider: pulumi.ProviderResource | None = None) -> pulumi.ResourceOptions:
        """The step's dependencies and the options its plan asks for, on this domain's provider of its kind."""
        depends = [self._registered[name] for name in step.waits_for]
        depends += [r for wait in step.platform if (r := self._platform(wait)) is not None]
        if step.after_previous_batch:
            depends += list(self._args.wave_after)
        asked = step.options
        options: dict[str, Any] = {"parent": self, "depends_on": depends}
        if provider is not None:
            options["provider"] = provider
        if asked.protect is not None:
            options["protect"] = asked.protect
        if asked.ignore_changes:
            options["ignore_changes"] = list(asked.ignore_changes)
        if asked.delete_before_replace:
            options["delete_before_replace"] = True
        if asked.create_timeout_seconds is not None:
            options["custom_timeouts"] = pulumi.CustomTimeouts(create=f"{asked.create_timeout_seconds}s")
        return pulumi.ResourceOptions(**options)

    def _register(self, step: Step) -> pulumi.Resource:
        args = self._args
        name = f"{self._name}-{step.name}"
        match step:
            case PciMappingStep():
                return proxmoxve.hardware.mapping.Pci(
                    name, **step.args, opts=self._options(step, args.proxmox_provider)
                )
            case CloudInitStep():
                # The user data carries the join token (and the registry credentials and the proxy's login), so the
                # whole snippet is a secret end to end.
                render = step.user_data
                auth = args.registry_auth if args.registry_auth is not None else pulumi.Output.from_input("")
                login = args.proxy_auth if args.proxy_auth is not None else pulumi.Output.from_input("")
                user_data: pulumi.Output[str] = pulumi.Output.secret(
                    pulumi.Output.all(args.rke2_token, auth, login).apply(
                        lambda v: render(v[0], v[1] or None, v[2] or None)
                    )
                )
                return proxmoxve.FileLegacy(
                    name,
                    **step.args,
                    source_raw={"data": user_data, "file_name": step.file_name},
                    opts=self._options(step, args.proxmox_provider),
                )
            case VmStep():
                return proxmoxve.VmLegacy(name, **step.args, opts=self._options(step, args.proxmox_provider))
            case NodeLabelsStep():
                return register_node_patch(name, dict(step.manifest), self._options(step, args.kubernetes_provider))
            case SmokeJobStep():
                return register_object(name, dict(step.manifest), self._options(step, args.kubernetes_provider))
            case LocalStep():
                return self._local_command(name, step)
            case RemoteStep():
                return self._remote_command(name, step)
            case _:
                assert_never(step)

    def _triggers(self, run: Command) -> list[Any] | None:
        ids = [self._registered[source] for source in run.id_triggers]
        triggers = [r.id for r in ids if isinstance(r, pulumi.CustomResource)] + list(run.triggers)
        return triggers or None

    def _remote_command(self, name: str, step: RemoteStep) -> pulumi.Resource:
        run = step.command
        # Without a key, pulumi-command's SSH client uses the ssh-agent (SSH_AUTH_SOCK); the loader refuses a step
        # that needs SSH when neither is there.
        return command.remote.Command(
            name,
            connection=command.remote.ConnectionArgs(
                host=step.host, user=step.user, private_key=self._args.ssh_private_key
            ),
            create=run.create,
            update=run.update,
            delete=run.delete,
            triggers=self._triggers(run),
            # pulumi-command sends no stdin for none: the step's `cat` reads an empty input then.
            stdin=self._stdin(run),
            opts=self._options(step),
        )

    def _stdin(self, run: Command) -> pulumi.Output[str] | None:
        """The step's standard input from the registry credentials and the proxy's login, a secret whenever either
        is set."""
        render = run.stdin_from_registry_auth
        if render is None:
            return None
        auth, login = self._args.registry_auth, self._args.proxy_auth
        if auth is None and login is None:
            return pulumi.Output.from_input(render(None))
        values = pulumi.Output.all(auth or pulumi.Output.from_input(""), login or pulumi.Output.from_input(""))
        return pulumi.Output.secret(values.apply(lambda v: render(v[0] or None, v[1] or None)))

    def _local_command(self, name: str, step: LocalStep) -> pulumi.Resource:
        run = step.command
        environment: dict[str, Any] = dict(run.environment)
        if run.proxmox_credentials:
            environment.update(self._args.proxmox_credential_env)
        return command.local.Command(
            name,
            create=run.create,
            update=run.update,
            delete=run.delete,
            interpreter=list(run.interpreter or ()),
            environment=environment or None,
            triggers=self._triggers(run),
            opts=self._options(step),
        )
