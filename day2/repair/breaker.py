"""`gpu-pool repair --reset-breaker --stack S`: a person closes the unattended repair's breaker, recorded with who
and when in its ConfigMap (day2/repair/unattended.py), by a conditional update (the ConfigMap's resourceVersion),
so a failure the watcher records at the same moment is never overwritten unseen."""

from __future__ import annotations

import datetime
import getpass
import socket
from typing import TextIO

from components.unattended.objects import BREAKER_CONFIGMAP
from config.stack import StackConfig
from day2.errors import Day2Error
from day2.kube_client import connect
from day2.repair.unattended import breaker_data, breaker_of, reset
from node.kube import ApiError, Conflict


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def reset_breaker(stack: StackConfig, stack_name: str, out: TextIO, now: datetime.datetime) -> None:
    unattended = stack.repair.unattended
    if not unattended.enabled:
        raise Day2Error(
            f"--reset-breaker: stack {stack_name} has no unattended repair (gpu-pool:repair.unattended.enabled is "
            "not true): there is no breaker to reset"
        )
    namespace = unattended.namespace
    where = f"{namespace}/{BREAKER_CONFIGMAP}"
    path = f"/api/v1/namespaces/{namespace}/configmaps/{BREAKER_CONFIGMAP}"
    try:
        kube, _server = connect(stack.kubernetes.kubeconfig, stack.kubernetes.context)
    except Day2Error as error:
        raise Day2Error(f"--reset-breaker: {error}") from None
    try:
        current = kube.get(path)
    except ApiError as error:
        if error.status is None:
            raise Day2Error(f"--reset-breaker: cannot reach the cluster: {error}") from None
        raise Day2Error(f"--reset-breaker: cannot read ConfigMap {where}: HTTP {error.status} {error}") from None
    if current is None:
        raise Day2Error(f"--reset-breaker: cannot read ConfigMap {where}: HTTP 404 (is the watcher deployed?)")
    breaker = breaker_of(current.get("data"))
    closed = reset(breaker, who(), now)
    try:
        # The update carries the resourceVersion read above: a change in between answers 409, nothing is lost.
        kube.update(path, {**current, "data": breaker_data(closed)})
    except Conflict:
        raise Day2Error(
            f"--reset-breaker: cannot update ConfigMap {where}: HTTP 409 (it changed since it was read: run it again)"
        ) from None
    except ApiError as error:
        raise Day2Error(f"--reset-breaker: cannot update ConfigMap {where}: HTTP {error.status} {error}") from None
    was = (
        f"was open since {breaker.opened_at or 'an unknown time'} after {len(breaker.failures)} repairs that did not "
        "fix"
        if breaker.open
        else "was closed"
    )
    out.write(f"breaker of stack {stack_name}: {was}; closed by {closed.reset_by} at {closed.reset_at} ({where})\n")
