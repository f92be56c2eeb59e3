"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker, joined, labelled and tainted.

The component registers its plan (plan.py) and nothing else: which steps exist, what each runs and what it
waits for are decided there, as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes.provider
import pulumi_proxmoxve as proxmoxve

from components.gpu_failure_domain.cloud_init import build_user_data
from components.gpu_failure_domain.node_metadata import ssh_host
from components.gpu_failure_domain.plan import DomainPlan, PlatformWait, Step
from components.gpu_failure_domain.proxmox_vm import pci_mapping_args, snippet_file_name, vm_args
from components.shared.kubernetes_objects import register_node_patch, register_object
from components.shared.node_marking import GpuNodeMarking
from components.shared.platform_handles import PlatformHandles
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig

TYPE_TOKEN = "gpu-pool:proxmox:GpuFailureDomain"
# bpg gives a disk's `speed` block a DefaultFunc of all-zero limits, which the bridge applies to the inputs, but
# reads a disk without limits back as no block (proxmoxtf/resource/vm/disk/schema.go mkDiskSpeed and disk.go
# Read, v0.111.1): every preview then showed an update of every VM (`disks[0].speed`), seen under the real
# engine. The program sets no limits, so the block is left to Proxmox.
VM_IGNORED = ["disks[0].speed"]


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

    def _options(self, step: Step, **extra: Any) -> pulumi.ResourceOptions:
        depends = [self._registered[name] for name in step.waits_for]
        depends += [r for wait in step.platform if (r := self._platform(wait)) is not None]
        if step.after_previous_batch:
            depends += list(self._args.wave_after)
        options: dict[str, Any] = {"parent": self, "depends_on": depends}
        if step.delete_before_replace:
            options["delete_before_replace"] = True
        return pulumi.ResourceOptions(**(options | extra))

    def _register(self, step: Step) -> pulumi.Resource:
        args, domain, stack = self._args, self._args.domain, self._args.stack
        name = f"{self._name}-{step.name}"
        proxmox = {"provider": args.proxmox_provider}
        if step.kind == "pci-mapping":
            return proxmoxve.hardware.mapping.Pci(
                name, **pci_mapping_args(domain, step.card), opts=self._options(step, **proxmox)
            )
        if step.kind == "cloud-init":
            # The user data carries the join token, so the whole snippet is a secret end to end.
            marking = GpuNodeMarking.from_kyverno(stack.kyverno)
            user_data: pulumi.Output[str] = pulumi.Output.secret(
                args.rke2_token.apply(lambda token: build_user_data(domain, stack.rke2, token, marking))
            )
            return proxmoxve.FileLegacy(
                name,
                content_type="snippets",
                datastore_id=stack.proxmox.snippets_datastore,
                node_name=domain.proxmox_node,
                source_raw={"data": user_data, "file_name": snippet_file_name(domain)},
                # cloud-init runs once, at first boot. Rewriting the snippet later would change nothing now, but
                # Proxmox derives cloud-init's instance-id from it, so the VM's next cold start would re-run first
                # boot (new SSH host keys, RKE2 reinstalled). Its inputs are first-boot only. A replacement (another
                # node or datastore) keeps the file name, hence the resource id: created first, the new file would
                # be deleted by the old one's delete.
                opts=self._options(step, ignore_changes=["sourceRaw"], delete_before_replace=True, **proxmox),
            )
        if step.kind == "vm":
            # A renamed or removed domain must never silently destroy a GPU node. The snippet is a plain
            # dependency: the VM names it by its (fixed) volume id, see proxmox_vm.snippet_file_id.
            return proxmoxve.VmLegacy(
                name,
                **vm_args(domain, stack.proxmox),
                opts=self._options(step, protect=domain.protect, ignore_changes=VM_IGNORED, **proxmox),
            )
        if step.kind == "node-labels":
            assert step.manifest is not None
            options = self._options(step, provider=args.kubernetes_provider)
            return register_node_patch(name, dict(step.manifest), options)
        if step.kind == "smoke-test":
            assert step.manifest is not None
            # pulumi-kubernetes awaits a Job until it completes: `pulumi up` fails here, named after this domain,
            # if the CUDA sample fails on its card. The provider's Job await defaults to 10 minutes; the image
            # pull comes on top of the run.
            timeout = pulumi.CustomTimeouts(create=f"{stack.smoke_test.timeout_seconds + 600}s")
            return register_object(
                name,
                dict(step.manifest),
                self._options(step, provider=args.kubernetes_provider, custom_timeouts=timeout),
            )
        return self._command(name, step)

    def _command(self, name: str, step: Step) -> pulumi.Resource:
        run = step.command
        assert run is not None
        ids = [self._registered[source] for source in run.id_triggers]
        triggers: list[Any] = [r.id for r in ids if isinstance(r, pulumi.CustomResource)] + list(run.triggers)
        if step.kind == "remote":
            domain = self._args.domain
            host = ssh_host(domain)
            # Without a key, pulumi-command's SSH client uses the ssh-agent (SSH_AUTH_SOCK); the loader refuses
            # a step that needs SSH when neither is there.
            return command.remote.Command(
                name,
                connection=command.remote.ConnectionArgs(
                    host=host, user=domain.username, private_key=self._args.ssh_private_key
                ),
                create=run.create,
                update=run.update,
                delete=run.delete,
                triggers=triggers or None,
                opts=self._options(step),
            )
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
            triggers=triggers or None,
            opts=self._options(step),
        )
