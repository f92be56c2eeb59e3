"""What `pulumi up` needs from the machine it runs on, checked at preview (not by the offline preview)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from config.stack import StackConfig

AGENT = "SSH_AUTH_SOCK"


def _agent_for_snippets(stack: StackConfig, has_ssh_private_key: bool, agent: bool) -> list[str]:
    if not stack.proxmox.ssh.agent or agent:
        return []
    return [
        "gpu-pool:proxmox.ssh.agent: the Proxmox provider uploads the cloud-init snippets over SSH with your "
        f"ssh-agent, and {AGENT} is not set: start an agent and `ssh-add` the key for "
        f"{stack.proxmox.ssh.username}@<proxmox node>"
    ]


def _key_for_kernel_upgrades(stack: StackConfig, has_ssh_private_key: bool, agent: bool) -> list[str]:
    pinned = [domain.name for domain in stack.failure_domains if domain.kernel is not None]
    if not pinned or has_ssh_private_key or agent:
        return []
    return [
        f"gpu-pool:failureDomains ({', '.join(pinned)}).kernel: the kernel upgrade logs in to the VM over SSH, "
        f"but there is neither an ssh-agent ({AGENT}) nor the secret gpu-pool:sshPrivateKey: run "
        "`pulumi config set --secret gpu-pool:sshPrivateKey < ~/.ssh/id_ed25519` or start an agent and ssh-add"
    ]


# The machine's rules, by the id docs/validation.md lists them under.
ENVIRONMENT_RULES: tuple[tuple[str, Callable[[StackConfig, bool, bool], list[str]]], ...] = (
    ("ssh-agent-for-snippets", _agent_for_snippets),
    ("ssh-key-for-kernel-upgrades", _key_for_kernel_upgrades),
)


def environment_problems(stack: StackConfig, *, has_ssh_private_key: bool, environ: Mapping[str, str]) -> list[str]:
    """Settings that are valid on their own but would fail during `up` on this machine."""
    agent = bool(environ.get(AGENT))
    return [problem for _, rule in ENVIRONMENT_RULES for problem in rule(stack, has_ssh_private_key, agent)]
