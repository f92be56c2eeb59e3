"""A wait for a condition on the cluster: polled until done or its deadline, a line at least once a progress
interval saying what it sees, and on timeout the likeliest cause. An ApiError inside a check is "not yet" until the
deadline (an API server restarted during a wait does not end the turn: FIELD-REVIEW-6 WRONG-5); the last one is
named in the progress line and the timeout. `tick` runs at every poll (the watcher renews its Lease there)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.kube import ApiError


class Out(Protocol):
    """Where a turn's progress lines go (a step's stdout, the watcher's stamped log)."""

    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


class StepFailed(Exception):
    """A transition that cannot go on: one line saying why and what to do (never a traceback)."""


def likely_cause(error: str, otherwise: str) -> str:
    """From the API's (or kubectl's) last message, what is most probably wrong."""
    text = error.lower()
    if "no such file" in text and ("kubeconfig" in text or "stat " in text):
        return "the kubeconfig file does not exist: check gpu-pool:kubernetes.kubeconfig"
    unreachable = ("unable to connect", "refused", "no such host", "i/o timeout", "no answer from the api server")
    if any(sign in text for sign in unreachable):
        return "kubectl cannot reach the API server: check gpu-pool:kubernetes (kubeconfig, context) and the network"
    if any(sign in text for sign in ("unauthorized", "forbidden", "certificate")):
        return "the API server refuses the kubeconfig's credentials: check gpu-pool:kubernetes.context and its user"
    if "context" in text and "does not exist" in text:
        return "the kubeconfig has no such context: check gpu-pool:kubernetes.context"
    return otherwise


# check() -> (done, what it sees now, the likeliest cause if it never gets done)
Check = Callable[[], tuple[bool, str, str]]


@dataclass
class Waiter:
    what: str
    minutes: float
    out: Out | None = None
    poll: float = field(default_factory=lambda: float(os.environ.get("GPU_POOL_POLL_SECONDS", "10")))
    progress: float = field(default_factory=lambda: float(os.environ.get("GPU_POOL_PROGRESS_SECONDS", "60")))
    tick: Callable[[], None] | None = None
    sleep: Callable[[float], None] = time.sleep

    def say(self, line: str) -> None:
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()

    def until(self, check: Check) -> str:
        """Waits; what it saw when done. StepFailed on the deadline."""
        started = time.monotonic()
        deadline = started + self.minutes * 60
        last_report, last_error = started, ""
        self.say(f"waiting for {self.what} (up to {self.minutes:g} min)")
        while True:
            try:
                done, status, cause = check()
                last_error = ""
            except ApiError as error:
                done, status, cause, last_error = False, "the API server did not answer", "", str(error)
            if done:
                self.say(f"done: {self.what} ({status}) after {time.monotonic() - started:.0f} s")
                return status
            now = time.monotonic()
            if now >= deadline:
                seen = f"; last API error: {last_error}" if last_error else ""
                raise StepFailed(
                    f"timed out after {self.minutes:g} min waiting for {self.what}. Last seen: {status}{seen}. "
                    f"Likeliest cause: {likely_cause(last_error, cause or 'the API server is away')}"
                )
            if now - last_report >= self.progress:
                seen = f" (API: {last_error})" if last_error else ""
                self.say(f"still waiting for {self.what}, {now - started:.0f} s: {status}{seen}")
                last_report = now
            if self.tick is not None:
                try:
                    self.tick()
                except ApiError as error:
                    last_error = str(error)
            self.sleep(self.poll)
