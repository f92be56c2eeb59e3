"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker, joined, labelled and tainted."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as kubernetes
import pulumi_kubernetes.provider
import pulumi_proxmoxve as proxmoxve

from components.gpu_failure_domain.cloud_init import build_user_data
from components.gpu_failure_domain.kernel_upgrade import (
    drain_command,
    install_kernel_command,
    login_check_command,
    unchanged_kernel_command,
    uncordon_command,
)
from components.gpu_failure_domain.node_metadata import (
    node_labels,
    taint_command,
    untaint_command,
)
from components.gpu_failure_domain.node_steps import (
    INTERPRETER,
    gpu_ready_environment,
    node_steps_script,
    power_cycle_environment,
    step_environment,
)
from components.gpu_failure_domain.proxmox_vm import mapped_indexes, pci_mapping_args, snippet_file_name, vm_args
from components.gpu_failure_domain.rollout import (
    node_cleanup_command,
    rollout_done_command,
    rollout_state,
)
from components.gpu_failure_domain.smoke_test import build_smoke_job, smoke_device, validated_stack
from components.gpu_failure_domain.wave_steps import wave_gate, wave_steps
from components.shared.kubectl import kubectl_argv, kubectl_prefix
from components.shared.kubernetes_objects import register_object
from components.shared.node_marking import GpuNodeMarking
from components.shared.platform_handles import PlatformHandles
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig

# How long a node may take to register and be Ready after its VM is created (cloud-init, RKE2 install).
NODE_READY_MINUTES = 30

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
    rke2_token: pulumi.Output[str]
    proxmox_credential_env: dict[str, pulumi.Output[str]]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: pulumi_kubernetes.provider.Provider
    platform: PlatformHandles
    # The key the kernel upgrade logs in to the VM with; None uses the ssh-agent (SSH_AUTH_SOCK).
    ssh_private_key: pulumi.Output[str] | None = None
    # Day-2 wave (rollout.py): what this domain has to roll in this `up` (empty: nothing, no cross-domain wait)
    # and the previous batch's last steps, which its disruptive steps wait for.
    wave_changes: tuple[str, ...] = ()
    wave_after: tuple[pulumi.Resource, ...] = ()


class GpuFailureDomain(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    vm_id: pulumi.Output[int]
    zone: pulumi.Output[str]
    sharing_profile: pulumi.Output[str]
    gpu_slots: pulumi.Output[int]
    node_ready: command.local.Command
    rollout_done: command.local.Command

    def __init__(self, name: str, args: GpuFailureDomainArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        domain = args.domain
        stack = args.stack
        marking = GpuNodeMarking.from_kyverno(stack.kyverno)
        proxmox_opts = pulumi.ResourceOptions(parent=self, provider=args.proxmox_provider)
        kubectl = kubectl_prefix(stack.kubernetes.kubeconfig, stack.kubernetes.context)
        kubectl_args = kubectl_argv(stack.kubernetes.kubeconfig, stack.kubernetes.context)

        vm_depends: list[pulumi.Resource] = []
        for index in mapped_indexes(domain):
            # The first card keeps the one-card resource name: a domain that grows a second card keeps its URN.
            suffix = "" if index == 0 else f"-{index}"
            mapping = proxmoxve.hardware.mapping.Pci(
                f"{name}-pci-mapping{suffix}", **pci_mapping_args(domain, index), opts=proxmox_opts
            )
            vm_depends.append(mapping)

        # The user data carries the join token, so the whole snippet is a secret end to end.
        user_data: pulumi.Output[str] = pulumi.Output.secret(
            args.rke2_token.apply(lambda token: build_user_data(domain, stack.rke2, token, marking))
        )
        snippet = proxmoxve.FileLegacy(
            f"{name}-cloud-init",
            content_type="snippets",
            datastore_id=stack.proxmox.snippets_datastore,
            node_name=domain.proxmox_node,
            source_raw={"data": user_data, "file_name": snippet_file_name(domain)},
            opts=pulumi.ResourceOptions.merge(
                proxmox_opts,
                pulumi.ResourceOptions(
                    # cloud-init runs once, at first boot. Rewriting the snippet later would change nothing now,
                    # but Proxmox derives cloud-init's instance-id from it, so the VM's next cold start would
                    # re-run first boot (new SSH host keys, RKE2 reinstalled). Its inputs are first-boot only.
                    ignore_changes=["sourceRaw"],
                    # A replacement (another node or datastore) keeps the file name, hence the resource id:
                    # created first, the new file would be deleted by the old one's delete.
                    delete_before_replace=True,
                ),
            ),
        )

        # Deletes run dependents first: the VM depends on this step, so a removed domain's VM goes first and then
        # this step's delete removes the Node object the VM left behind (nothing else would).
        node_cleanup = command.local.Command(
            f"{name}-node-cleanup",
            create=f"echo {shlex.quote(f'node {domain.hostname} is removed with its VM')}",
            delete=node_cleanup_command(domain.hostname, kubectl),
            interpreter=["/bin/sh", "-c"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        vm = proxmoxve.VmLegacy(
            f"{name}-vm",
            **vm_args(domain, stack.proxmox),
            # A renamed or removed domain must never silently destroy a GPU node. The snippet is a plain
            # dependency: the VM names it by its (fixed) volume id, see proxmox_vm.snippet_file_id.
            opts=pulumi.ResourceOptions.merge(
                proxmox_opts,
                pulumi.ResourceOptions(
                    protect=domain.protect,
                    depends_on=[*vm_depends, snippet, node_cleanup],
                    ignore_changes=VM_IGNORED,
                ),
            ),
        )

        script = node_steps_script()
        wave = wave_steps(self, name, args, kubectl, vm) if args.wave_changes else []
        power_cycle = command.local.Command(
            f"{name}-power-cycle",
            create=script,
            # Runs again whenever a cold-start setting or the mapped device changes (its environment): it
            # checks what is really pending, then drains, stops, starts and uncordons, or does nothing.
            update=script,
            interpreter=INTERPRETER,
            environment={
                **power_cycle_environment(domain, stack.proxmox, kubectl_args, NODE_READY_MINUTES),
                **args.proxmox_credential_env,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[vm, *wave]),
        )

        self.node_ready = command.local.Command(
            f"{name}-node-ready",
            create=script,
            update=script,
            interpreter=INTERPRETER,
            environment=step_environment("node-ready", domain.hostname, kubectl_args, NODE_READY_MINUTES),
            triggers=[vm.id, domain.hostname],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[power_cycle]),
        )

        labels = kubernetes.core.v1.NodePatch(
            f"{name}-node-labels",
            metadata={
                "name": domain.hostname,
                "labels": node_labels(domain, marking),
                # RKE2 registered these labels under its own field manager; take them over so a changed
                # sharing profile converges instead of failing on an apply conflict.
                "annotations": {"pulumi.com/patchForce": "true"},
            },
            # The profile this label names must exist first, or that node's device plugin loses its card.
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.kubernetes_provider,
                depends_on=[self.node_ready, args.platform.time_slicing_config, *wave],
            ),
        )

        taint = command.local.Command(
            f"{name}-node-taint",
            create=taint_command(domain.hostname, kubectl, marking),
            delete=untaint_command(domain.hostname, kubectl, marking),
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.hostname, marking.taint],
            # Delete first: the old step's delete removes the taint by key, which would undo the new one.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.node_ready], delete_before_replace=True),
        )

        gate: list[pulumi.Resource] = [labels, taint, *wave]
        if domain.kernel is not None:
            gate = self._kernel_upgrade(name, args, kubectl, kubectl_args, gate)
        smoke_job: pulumi.Resource | None = None
        if stack.smoke_test.enabled and args.platform.smoke_namespace is not None:
            validated = validated_stack(
                chart_version=stack.gpu_operator.chart_version,
                driver_version=stack.gpu_operator.driver_version,
                node=domain.hostname,
                device=smoke_device(domain),
                image=stack.smoke_test.image,
                kernel=domain.kernel,
            )
            job = build_smoke_job(
                domain.name,
                stack.smoke_test,
                validated,
                toleration=None if stack.kyverno.enabled else marking.toleration,
            )
            # The Job starts only once its node advertises its GPUs on the pinned driver: the first driver build
            # and the operator's one-node-at-a-time driver upgrades happen here, not inside the Job's deadline.
            # SMOKE_JOB makes the gate run again whenever the Job does (a new name: what it validates changed).
            gpu_ready = command.local.Command(
                f"{name}-gpu-ready",
                create=script,
                update=script,
                interpreter=INTERPRETER,
                environment=gpu_ready_environment(domain, stack, kubectl_args, SMOKE_JOB=job["metadata"]["name"]),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*gate, args.platform.operator]),
            )
            policy = [args.platform.steering_policy] if args.platform.steering_policy is not None else []
            # pulumi-kubernetes awaits a Job until it completes: `pulumi up` fails here, named after
            # this domain, if the CUDA sample fails on its card.
            smoke_job = register_object(
                f"{name}-cuda-smoke-test",
                job,
                pulumi.ResourceOptions(
                    parent=self,
                    provider=args.kubernetes_provider,
                    depends_on=[gpu_ready, args.platform.smoke_namespace, *policy],
                    delete_before_replace=True,
                    # The provider's Job await defaults to 10 minutes; the image pull comes on top of the run.
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{stack.smoke_test.timeout_seconds + 600}s"),
                ),
            )
        last: list[pulumi.Resource] = [smoke_job] if smoke_job else list(gate)
        if args.wave_changes:
            last = wave_gate(self, name, args, kubectl_args, [*last, *wave])
        if domain.kernel is not None:
            kernel_uncordon = command.local.Command(
                f"{name}-kernel-uncordon",
                create=uncordon_command(domain.hostname, kubectl),
                update=unchanged_kernel_command(domain.kernel),
                interpreter=["/bin/sh", "-c"],
                triggers=[domain.kernel],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[smoke_job] if smoke_job else gate),
            )
            last.append(kernel_uncordon)
        state = rollout_state(domain, stack)
        # Always there, never waited on across domains unless a wave is planned: on a first install it only
        # records what the node was built with; in a wave it ends this domain's turn (uncordon, record).
        self.rollout_done = command.local.Command(
            f"{name}-rollout",
            create=rollout_done_command(domain.hostname, kubectl, state),
            update=rollout_done_command(domain.hostname, kubectl, state),
            interpreter=["/bin/sh", "-c"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=last),
        )

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

    def _kernel_upgrade(
        self,
        name: str,
        args: GpuFailureDomainArgs,
        kubectl: str,
        kubectl_args: list[str],
        after: list[pulumi.Resource],
    ) -> list[pulumi.Resource]:
        """Cordon and drain, install and hold the kernel, reboot, rebuild the driver: this domain only.

        Every step is triggered by the kernel setting alone, so changing it re-runs the sequence; any other
        change to a step runs its `update`, which does nothing.
        """
        domain, stack = args.domain, args.stack
        assert domain.kernel is not None
        local = pulumi.ResourceOptions(parent=self)
        unchanged = unchanged_kernel_command(domain.kernel)
        host = domain.network.ipv4.split("/")[0] if domain.network.ipv4 != "dhcp" else domain.hostname
        # Without a key, pulumi-command's SSH client uses the ssh-agent (SSH_AUTH_SOCK); the loader refuses a
        # pinned kernel when neither is there.
        connection = command.remote.ConnectionArgs(host=host, user=domain.username, private_key=args.ssh_private_key)
        # A key the VM does not trust must fail before the drain, not leave the node cordoned after it.
        login = command.remote.Command(
            f"{name}-kernel-login",
            connection=connection,
            create=login_check_command(),
            update=unchanged,
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=after)),
        )
        drain = command.local.Command(
            f"{name}-kernel-drain",
            create=drain_command(domain.hostname, kubectl),
            update=unchanged,
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[*after, login])),
        )
        install = command.remote.Command(
            f"{name}-kernel-install",
            connection=connection,
            create=install_kernel_command(domain.kernel),
            update=unchanged,
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[drain])),
        )
        script = node_steps_script()
        rebuilt = command.local.Command(
            f"{name}-kernel-driver-rebuild",
            create=script,
            update=unchanged,
            interpreter=INTERPRETER,
            environment=step_environment(
                "kernel-rebuild",
                domain.hostname,
                kubectl_args,
                NODE_READY_MINUTES,
                KERNEL=domain.kernel,
                OPERATOR_NAMESPACE=stack.gpu_operator.namespace,
            ),
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[install])),
        )
        return [rebuilt]
