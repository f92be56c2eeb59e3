"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker, joined, labelled and tainted."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as kubernetes
import pulumi_kubernetes.provider
import pulumi_proxmoxve as proxmoxve

from components.cloud_init import build_user_data
from components.node_metadata import (
    gpu_taint,
    kubectl_prefix,
    node_labels,
    node_ready_command,
    taint_command,
    untaint_command,
)
from components.power_cycle import power_cycle_environment, power_cycle_script, power_cycle_triggers
from components.proxmox_vm import pci_mapping_args, vm_args
from config.failure_domain import FailureDomainConfig
from config.proxmox import ProxmoxConfig
from config.rke2 import KubernetesConfig, Rke2Config

TYPE_TOKEN = "gpu-pool:proxmox:GpuFailureDomain"


@dataclass(frozen=True)
class GpuFailureDomainArgs:
    domain: FailureDomainConfig
    proxmox: ProxmoxConfig
    rke2: Rke2Config
    kubernetes: KubernetesConfig
    gpu_slots: int
    rke2_token: pulumi.Output[str]
    proxmox_credential_env: dict[str, pulumi.Output[str]]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: pulumi_kubernetes.provider.Provider


class GpuFailureDomain(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    vm_id: pulumi.Output[int]
    zone: pulumi.Output[str]
    sharing_profile: pulumi.Output[str]
    gpu_slots: pulumi.Output[int]
    node_ready: command.local.Command

    def __init__(
        self, name: str, args: GpuFailureDomainArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        domain = args.domain
        proxmox_opts = pulumi.ResourceOptions(parent=self, provider=args.proxmox_provider)
        kubectl = kubectl_prefix(args.kubernetes.kubeconfig, args.kubernetes.context)

        vm_depends: list[pulumi.Resource] = []
        if domain.gpu.passthrough == "mapping":
            mapping = proxmoxve.hardware.mapping.Pci(
                f"{name}-pci-mapping", **pci_mapping_args(domain), opts=proxmox_opts
            )
            vm_depends.append(mapping)

        # The user data carries the join token, so the whole snippet is a secret end to end.
        user_data: pulumi.Output[str] = pulumi.Output.secret(
            args.rke2_token.apply(lambda token: build_user_data(domain, args.rke2, token))
        )
        snippet = proxmoxve.FileLegacy(
            f"{name}-cloud-init",
            content_type="snippets",
            datastore_id=args.proxmox.snippets_datastore,
            node_name=domain.proxmox_node,
            source_raw={"data": user_data, "file_name": f"{domain.hostname}-user-data.yaml"},
            opts=proxmox_opts,
        )

        spec = vm_args(domain, args.proxmox)
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
            environment={**power_cycle_environment(domain, args.proxmox), **args.proxmox_credential_env},
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

        kubernetes.core.v1.NodePatch(
            f"{name}-node-labels",
            metadata={
                "name": domain.hostname,
                "labels": node_labels(domain),
                # RKE2 registered these labels under its own field manager; take them over so a changed
                # sharing profile converges instead of failing on an apply conflict.
                "annotations": {"pulumi.com/patchForce": "true"},
            },
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.kubernetes_provider, depends_on=[self.node_ready]
            ),
        )

        command.local.Command(
            f"{name}-node-taint",
            create=taint_command(domain.hostname, kubectl),
            delete=untaint_command(domain.hostname, kubectl),
            interpreter=["/bin/sh", "-c"],
            triggers=[domain.hostname, gpu_taint()],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.node_ready]),
        )

        self.node_name = pulumi.Output.from_input(domain.hostname)
        self.vm_id = pulumi.Output.from_input(domain.vm_id)
        self.zone = pulumi.Output.from_input(domain.name)
        self.sharing_profile = pulumi.Output.from_input(domain.sharing)
        self.gpu_slots = pulumi.Output.from_input(args.gpu_slots)
        self.register_outputs(
            {
                "nodeName": self.node_name,
                "vmId": self.vm_id,
                "zone": self.zone,
                "sharingProfile": self.sharing_profile,
                "gpuSlots": self.gpu_slots,
            }
        )
