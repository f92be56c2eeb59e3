"""What `pulumi up` needs from the machine it runs on, checked at preview (not by the offline preview)."""

from __future__ import annotations

from collections.abc import Mapping

from config.stack import StackConfig

AGENT = "SSH_AUTH_SOCK"


def environment_problems(stack: StackConfig, *, has_ssh_private_key: bool, environ: Mapping[str, str]) -> list[str]:
    """Settings that are valid on their own but would fail during `up` on this machine."""
    problems: list[str] = []
    agent = bool(environ.get(AGENT))
    if stack.proxmox.ssh.agent and not agent:
        problems.append(
            "gpu-pool:proxmox.ssh.agent: the Proxmox provider uploads the cloud-init snippets over SSH with your "
            f"ssh-agent, and {AGENT} is not set: start an agent and `ssh-add` the key for "
            f"{stack.proxmox.ssh.username}@<proxmox node>"
        )
    pinned = [domain.name for domain in stack.failure_domains if domain.kernel is not None]
    if pinned and not has_ssh_private_key and not agent:
        problems.append(
            f"gpu-pool:failureDomains ({', '.join(pinned)}).kernel: the kernel upgrade logs in to the VM over SSH, "
            f"but there is neither an ssh-agent ({AGENT}) nor the secret gpu-pool:sshPrivateKey: run "
            "`pulumi config set --secret gpu-pool:sshPrivateKey < ~/.ssh/id_ed25519` or start an agent and ssh-add"
        )
    return problems
