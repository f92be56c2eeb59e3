"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker, joined, labelled and tainted."""

from __future__ import annotations

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
    uncordon_command,
    wait_for_kernel_command,
)
from components.gpu_failure_domain.node_metadata import (
    kubectl_prefix,
    node_labels,
    node_ready_command,
    taint_command,
    untaint_command,
)
from components.gpu_failure_domain.power_cycle import power_cycle_environment, power_cycle_script, power_cycle_triggers
from components.gpu_failure_domain.proxmox_vm import pci_mapping_args, vm_args
from components.gpu_failure_domain.smoke_test import build_smoke_job, validated_stack
from components.shared.kubernetes_objects import register_object
from components.shared.node_marking import GpuNodeMarking
from components.shared.platform_handles import PlatformHandles
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig

TYPE_TOKEN = "gpu-pool:proxmox:GpuFailureDomain"


@dataclass(frozen=True)
class GpuFailureDomainArgs:
    domain: FailureDomainConfig
    stack: StackConfig
    rke2_token: pulumi.Output[str]
    proxmox_credential_env: dict[str, pulumi.Output[str]]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: pulumi_kubernetes.provider.Provider
    platform: PlatformHandles


class GpuFailureDomain(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    vm_id: pulumi.Output[int]
    zone: pulumi.Output[str]
    sharing_profile: pulumi.Output[str]
    gpu_slots: pulumi.Output[int]
    node_ready: command.local.Command

    def __init__(self, name: str, args: GpuFailureDomainArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        domain = args.domain
        stack = args.stack
        marking = GpuNodeMarking.from_kyverno(stack.kyverno)
        proxmox_opts = pulumi.ResourceOptions(parent=self, provider=args.proxmox_provider)
        kubectl = kubectl_prefix(stack.kubernetes.kubeconfig, stack.kubernetes.context)

        vm_depends: list[pulumi.Resource] = []
        if domain.gpu.passthrough == "mapping":
            mapping = proxmoxve.hardware.mapping.Pci(
                f"{name}-pci-mapping", **pci_mapping_args(domain), opts=proxmox_opts
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
            source_raw={"data": user_data, "file_name": f"{domain.hostname}-user-data.yaml"},
            opts=proxmox_opts,
        )

        spec = vm_args(domain, stack.proxmox)
        spec["initialization"] = {**spec["initialization"], "user_data_file_id": snippet.id}
        vm = proxmoxve.VmLegacy(
            f"{name}-vm",
            **spec,
            # A renamed or removed domain must never silently destroy a GPU node.
            opts=pulumi.ResourceOptions.merge(
                proxmox_opts, pulumi.ResourceOptions(protect=domain.protect, depends_on=vm_depends)
            ),
        )

        power_cycle = command.local.Command(
            f"{name}-power-cycle",
            create=power_cycle_script(),
            interpreter=["python3", "-c"],
            environment={**power_cycle_environment(domain, stack.proxmox), **args.proxmox_credential_env},
            triggers=power_cycle_triggers(domain),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[vm]),
        )

        self.node_ready = command.local.Command(
            f"{name}-node-ready",
            create=node_ready_command(domain.hostname, kubectl),
            interpreter=["/bin/sh", "-c"],
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
                depends_on=[self.node_ready, args.platform.time_slicing_config],
            ),
        )

        taint = command.local.Command(
            f"{name}-node-taint",
            create=taint_command(domain.hostname, kubectl, marking),
            delete=untaint_command(domain.hostname, kubectl, marking),
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.hostname, marking.taint],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.node_ready]),
        )

        gate: list[pulumi.Resource] = [labels, taint]
        if domain.kernel is not None:
            gate = self._kernel_upgrade(name, domain, stack, kubectl, gate)
        smoke_job: pulumi.Resource | None = None
        if stack.smoke_test.enabled and args.platform.smoke_namespace is not None:
            validated = validated_stack(
                chart_version=stack.gpu_operator.chart_version,
                driver_version=stack.gpu_operator.driver_version,
                node=domain.hostname,
                device=f"{domain.gpu.vendor_device_id}@{domain.proxmox_node}/{domain.gpu.pci_address}",
                image=stack.smoke_test.image,
                kernel=domain.kernel,
            )
            policy = [args.platform.steering_policy] if args.platform.steering_policy is not None else []
            # pulumi-kubernetes awaits a Job until it completes: `pulumi up` fails here, named after
            # this domain, if the CUDA sample fails on its card.
            smoke_job = register_object(
                f"{name}-cuda-smoke-test",
                build_smoke_job(
                    domain.name,
                    stack.smoke_test,
                    validated,
                    toleration=None if stack.kyverno.enabled else marking.toleration,
                ),
                pulumi.ResourceOptions(
                    parent=self,
                    provider=args.kubernetes_provider,
                    depends_on=[*gate, args.platform.operator, args.platform.smoke_namespace, *policy],
                    delete_before_replace=True,
                    # The provider's Job await defaults to 10 minutes; the image pull comes on top of the run.
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{stack.smoke_test.timeout_seconds + 600}s"),
                ),
            )
        if domain.kernel is not None:
            command.local.Command(
                f"{name}-kernel-uncordon",
                create=uncordon_command(domain.hostname, kubectl),
                interpreter=["/bin/sh", "-c"],
                triggers=[domain.kernel],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[smoke_job] if smoke_job else gate),
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
        self, name: str, domain: FailureDomainConfig, stack: StackConfig, kubectl: str, after: list[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """Cordon and drain, install and hold the kernel, reboot, rebuild the driver: this domain only.

        Every step is triggered by the kernel setting alone, so changing it re-runs the sequence.
        """
        assert domain.kernel is not None
        local = pulumi.ResourceOptions(parent=self)
        drain = command.local.Command(
            f"{name}-kernel-drain",
            create=drain_command(domain.hostname, kubectl),
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=after)),
        )
        host = domain.network.ipv4.split("/")[0] if domain.network.ipv4 != "dhcp" else domain.hostname
        install = command.remote.Command(
            f"{name}-kernel-install",
            connection={"host": host, "user": domain.username},
            create=install_kernel_command(domain.kernel),
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[drain])),
        )
        rebuilt = command.local.Command(
            f"{name}-kernel-driver-rebuild",
            create=wait_for_kernel_command(domain.hostname, domain.kernel, kubectl, stack.gpu_operator.namespace),
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.kernel],
            opts=pulumi.ResourceOptions.merge(local, pulumi.ResourceOptions(depends_on=[install])),
        )
        return [rebuilt]
