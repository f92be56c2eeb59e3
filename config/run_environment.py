"""What `pulumi up` needs from the machine it runs on, checked at preview (not by the offline preview)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from config.stack import StackConfig

AGENT = "SSH_AUTH_SOCK"
# Where the Proxmox provider (bpg/terraform-provider-proxmox, bridged) takes an SSH credential besides the agent;
# its SSH password defaults to the API password, which the rootPassword login has.
PROVIDER_SSH_ENV = ("PROXMOX_VE_SSH_PASSWORD", "PROXMOX_VE_SSH_PRIVATE_KEY")


def ssh_credential_problems(stack: StackConfig, environ: Mapping[str, str]) -> list[str]:
    """`proxmox.ssh.agent: false` leaves the snippet upload a credential only where one of the others is there."""
    if stack.proxmox.ssh.agent or stack.proxmox.auth == "rootPassword":
        return []
    if any(environ.get(name) for name in PROVIDER_SSH_ENV):
        return []
    return [
        "gpu-pool:proxmox.ssh.agent: false leaves the Proxmox provider no SSH credential for the cloud-init snippet "
        f"upload (the API token is no SSH login): set it to true and run an ssh-agent, or set "
        f"{' or '.join(PROVIDER_SSH_ENV)} in the environment, or log in with proxmox.auth: rootPassword (the SSH "
        "login then uses root@pam's password)"
    ]


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
    problems = [problem for _, rule in ENVIRONMENT_RULES for problem in rule(stack, has_ssh_private_key, agent)]
    return problems + ssh_credential_problems(stack, environ)
