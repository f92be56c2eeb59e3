"""Running a domain's node steps as `pulumi up` would, from the stack's own plan.json and manifests."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from config.failure_domain import FailureDomainConfig
from tests.e2e.kube import Kubectl, KubectlError
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed
from tests.environ import process_environment


@dataclass(frozen=True)
class StepRunner:
    stack: Previewed
    tools: Tools
    kubectl: Kubectl
    # What KUBECONFIG says on the machine that runs `pulumi up`.
    ambient_kubeconfig: Path

    def command(self, resource: str, **override: str) -> subprocess.CompletedProcess[str]:
        """A `command:local:Command`'s create, as pulumi-command runs it: `<interpreter...> <create>` with the
        process environment plus the resource's own, and `kubectl` resolved through PATH (the built one)."""
        argv, env = self._create(resource, override)
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)

    def start(self, resource: str, **override: str) -> subprocess.Popen[str]:
        """The same command started, its output (stdout and stderr together) readable line by line as it runs."""
        argv, env = self._create(resource, override)
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def _create(self, resource: str, override: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        inputs = self.stack.resource(resource)["inputs"]
        env = {
            **process_environment(),
            "PATH": f"{self.tools.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": str(self.ambient_kubeconfig),
            "KUBECACHEDIR": str(self.kubectl.cache_dir),
            **inputs.get("environment", {}),
            **override,
        }
        return [*inputs["interpreter"], inputs["create"]], env

    def node_patch(self, domain: FailureDomainConfig) -> Path:
        return self.stack.out / "manifests" / f"node-{domain.hostname}-patch.yaml"

    def converge(self, domain: FailureDomainConfig) -> None:
        """The domain's steps after its VM is up, in the program's order: node-ready, then labels and taint."""
        name = domain.name
        _succeeded(f"{name}-node-ready", self.command(f"{name}-node-ready"))
        _succeeded(f"{name}-node-labels", self.kubectl.server_side_apply(self.node_patch(domain), dry_run=False))
        _succeeded(f"{name}-node-taint", self.command(f"{name}-node-taint"))


def _succeeded(step: str, done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise KubectlError(f"{step} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
