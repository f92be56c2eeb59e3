"""`gpu-pool repair --reset-breaker --stack S`: a person closes the unattended repair's breaker, recorded with who
and when in its ConfigMap (day2/repair/unattended.py), by a conditional update (the ConfigMap's resourceVersion),
so a failure the watcher records at the same moment is never overwritten unseen."""

from __future__ import annotations

import datetime
import getpass
import logging
import socket
from typing import TextIO

from components.unattended.objects import BREAKER_CONFIGMAP
from config.stack import StackConfig
from day2.errors import Day2Error
from day2.repair.unattended import breaker_data, breaker_of, reset


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def reset_breaker(stack: StackConfig, stack_name: str, out: TextIO, now: datetime.datetime) -> None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    unattended = stack.repair.unattended
    if not unattended.enabled:
        raise Day2Error(
            f"--reset-breaker: stack {stack_name} has no unattended repair (gpu-pool:repair.unattended.enabled is "
            "not true): there is no breaker to reset"
        )
    logging.getLogger("urllib3").setLevel(logging.CRITICAL)
    namespace = unattended.namespace
    where = f"{namespace}/{BREAKER_CONFIGMAP}"
    try:
        config.load_kube_config(config_file=stack.kubernetes.kubeconfig, context=stack.kubernetes.context)
    except Exception as error:  # ConfigException, OSError, or a file that is not a kubeconfig at all
        raise Day2Error(f"--reset-breaker: cannot load the stack's kubeconfig: {error}") from None
    configuration = client.Configuration.get_default_copy()
    configuration.retries = 0
    core = client.CoreV1Api(client.ApiClient(configuration))
    try:
        current = core.read_namespaced_config_map(BREAKER_CONFIGMAP, namespace)
    except ApiException as error:
        raise Day2Error(f"--reset-breaker: cannot read ConfigMap {where}: HTTP {error.status} {error.reason}") from None
    except Exception as error:  # urllib3's connection errors
        raise Day2Error(f"--reset-breaker: cannot reach the cluster: {str(error).splitlines()[0]}") from None
    breaker = breaker_of(current.data)
    closed = reset(breaker, who(), now)
    current.data = breaker_data(closed)
    try:
        # replace carries the resourceVersion read above: a change in between answers 409, nothing is lost.
        core.replace_namespaced_config_map(BREAKER_CONFIGMAP, namespace, current)
    except ApiException as error:
        again = " (it changed since it was read: run it again)" if error.status == 409 else ""
        raise Day2Error(
            f"--reset-breaker: cannot update ConfigMap {where}: HTTP {error.status} {error.reason}{again}"
        ) from None
    was = (
        f"was open since {breaker.opened_at or 'an unknown time'} after {len(breaker.failures)} repairs that did not "
        "fix"
        if breaker.open
        else "was closed"
    )
    out.write(f"breaker of stack {stack_name}: {was}; closed by {closed.reset_by} at {closed.reset_at} ({where})\n")
