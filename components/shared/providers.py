"""Explicit providers built from the validated config: nothing depends on ambient provider settings."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as kubernetes
import pulumi_proxmoxve as proxmoxve

from config.loader import LoadedConfig
from config.secrets import proxmox_credential


def proxmox_credential_env(loaded: LoadedConfig) -> dict[str, pulumi.Output[str]]:
    """The credential the stack's own Proxmox API calls use, as a secret environment variable."""
    credential = proxmox_credential(loaded.stack.proxmox.auth)
    assert credential.provider_env is not None  # every Proxmox credential's row names its variable
    return {credential.provider_env: loaded.secrets.require(credential.key)}


def _secret(value: pulumi.Output[str] | None) -> pulumi.Output[str] | None:
    return None if value is None else pulumi.Output.secret(value)


def build_proxmox_provider(loaded: LoadedConfig) -> proxmoxve.Provider:
    cfg = loaded.stack
    ssh: dict[str, object] = {"username": cfg.proxmox.ssh.username, "agent": cfg.proxmox.ssh.agent}
    if cfg.proxmox.ssh.node_addresses:
        # A node entry without a port means 22 to the provider, so the configured port goes on every entry.
        ssh["nodes"] = [
            {"name": node, "address": address, "port": cfg.proxmox.ssh.port}
            for node, address in sorted(cfg.proxmox.ssh.node_addresses.items())
        ]
    root = cfg.proxmox.auth == "rootPassword"
    return proxmoxve.Provider(
        "proxmox",
        endpoint=cfg.proxmox.endpoint,
        insecure=cfg.proxmox.insecure,
        ssh=proxmoxve.ProviderSshArgs(**ssh),  # type: ignore[arg-type]
        api_token=None if root else _secret(loaded.secrets.get("proxmoxApiToken")),
        username="root@pam" if root else None,
        password=_secret(loaded.secrets.get("proxmoxRootPassword")) if root else None,
    )


def build_kubernetes_provider(loaded: LoadedConfig) -> kubernetes.Provider:
    """Upserts existing objects only with gpu-pool:kubernetes.adoptExisting, whose adoptions the cluster preflight
    names at every preview (existing_objects.py); explicit either way, so PULUMI_K8S_UPSERT_EXISTING_OBJECTS in
    someone's shell never adopts silently. Static, not switched per run: a provider input that flips would show
    the provider updated in the preview after every adoption."""
    cfg = loaded.stack
    return kubernetes.Provider(
        "kubernetes",
        kubeconfig=cfg.kubernetes.kubeconfig,
        context=cfg.kubernetes.context,
        upsert_existing_objects=cfg.kubernetes.adopt_existing,
    )
