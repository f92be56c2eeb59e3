"""How every kubectl step reaches the cluster: the stack's kubeconfig and context, quoted once, here."""

from __future__ import annotations

import shlex


def kubectl_argv(kubeconfig: str | None, context: str | None) -> list[str]:
    parts = ["kubectl"]
    if kubeconfig:
        parts += ["--kubeconfig", kubeconfig]
    if context:
        parts += ["--context", context]
    return parts


def kubectl_prefix(kubeconfig: str | None, context: str | None) -> str:
    return shlex.join(kubectl_argv(kubeconfig, context))
