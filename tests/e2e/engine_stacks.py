"""Stack files for the real engine: prod as committed, pointed at the e2e tier's cluster and a local chart."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from offline.runner import PROJECT, run_stack
from tests.e2e.engine import Engine, PulumiStack

# Test values in the shapes the program checks (config/secret_checks.py); set with `pulumi config set --secret`.
SECRETS = {
    "rke2Token": "K10" + "e2e0" * 16 + "::server:e2e-join-password",
    "proxmoxApiToken": "pulumi@pve!gpu-pool=00000000-e2e0-4000-8000-0000000000e2",
    # The deployed stack's proxy asks for a login (tests/e2e/test_canaries_deployed.py): a `#`, `@` and `/` in it,
    # the characters that break a URL. A stack whose proxy asks for none is told it is unused, not refused.
    "proxyAuth": "svc-gpu:e2e-proxy-canary#7@x/y",
}


def engine_config(prod: dict[str, Any], kubeconfig: Path, chart: Path) -> dict[str, Any]:
    """prod's stack file with the e2e cluster as its cluster and the packaged chart as its chart source."""
    config = copy.deepcopy(prod)
    config[f"{PROJECT}:kubernetes"] = {"kubeconfig": str(kubeconfig), "context": "e2e"}
    config[f"{PROJECT}:gpuOperator"] = {**config[f"{PROJECT}:gpuOperator"], "chart": str(chart)}
    return config


def new_stack(
    engine: Engine, work: Path, name: str, config: dict[str, Any], path: list[Path], env: dict[str, str]
) -> PulumiStack:
    """A stack initialised with a passphrase secrets provider and both secrets set as a user sets them."""
    stack = PulumiStack(engine, work, name, path=path, env=env)
    stack.init(config)
    for key, value in SECRETS.items():
        stack.set_secret(key, value)
    return stack


def offline_plan_names(config: dict[str, Any]) -> set[str]:
    """The resources the offline preview registers for this stack file (the mock monitor's plan)."""
    recording = run_stack("engine", config=config, secrets=SECRETS)
    return {registration.name for registration in recording.registrations}
