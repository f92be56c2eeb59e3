"""A coordination.k8s.io/v1 Lease held by one process, as client-go's leaderelection uses one
(tools/leaderelection/resourcelock): the holder is a unique identity per process (`<host>_<uuid>`), another
holder's Lease is taken only once `renewTime + leaseDurationSeconds` has passed, a held Lease is renewed (`renew`,
from a wait's tick), and every write is a full update carrying the resourceVersion read (a second taker gets 409).

    lease = Lease(kube, path, identity, seconds); lease.acquire(now) -> bool; lease.renew(now); lease.release()
"""

from __future__ import annotations

import datetime
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node.kube import ApiError, Conflict, Kube

# How often `renew` writes (its callers tick every poll): a third of the term is what client-go's RenewDeadline
# and RetryPeriod leave between renewals by default.
RENEW_FRACTION = 3


def identity() -> str:
    """This process's identity as a Lease holder: the pod's name (its hostname) and a UUID, as client-go's callers
    make it (`id := hostname + "_" + string(uuid.NewUUID())`)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(now: datetime.datetime) -> str:
    """A MicroTime (coordination.k8s.io/v1 renewTime needs the microseconds)."""
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parsed(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def free_for(lease: Mapping[str, Any], holder: str, now: datetime.datetime, default_seconds: int) -> bool:
    """Whether `holder` may take the Lease: nobody holds it, it is its own, or its holder's term ran out
    (`renewTime + leaseDurationSeconds`: a holder that died)."""
    spec = lease.get("spec") or {}
    who = spec.get("holderIdentity") or ""
    if not who or who == holder:
        return True
    at = _parsed(str(spec.get("renewTime") or spec.get("acquireTime") or ""))
    if at is None:
        return True
    return now > at + datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or default_seconds))


def holder_of(lease: Mapping[str, Any] | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def taken(lease: Mapping[str, Any], holder: str, now: datetime.datetime, seconds: int) -> dict[str, Any]:
    spec = dict(lease.get("spec") or {})
    mine = spec.get("holderIdentity") == holder
    spec.update(
        holderIdentity=holder,
        acquireTime=spec.get("acquireTime") if mine and spec.get("acquireTime") else micro_time(now),
        renewTime=micro_time(now),
        leaseDurationSeconds=seconds,
    )
    if not mine:
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    return {**lease, "spec": spec}


def released(lease: Mapping[str, Any]) -> dict[str, Any]:
    spec = {
        k: v for k, v in (lease.get("spec") or {}).items() if k not in ("holderIdentity", "acquireTime", "renewTime")
    }
    return {**lease, "spec": spec}


@dataclass
class Lease:
    kube: Kube
    path: str
    holder: str = field(default_factory=identity)
    seconds: int = 3600
    renewed: datetime.datetime | None = None

    def read(self) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.kube.get(self.path)
        return found

    def acquire(self, now: datetime.datetime) -> str:
        """'' when this process holds the Lease now, else who does (or why not)."""
        lease = self.read()
        if lease is None:
            return f"the Lease {self.path} is missing"
        if not free_for(lease, self.holder, now, self.seconds):
            return holder_of(lease)
        try:
            self.kube.update(self.path, taken(lease, self.holder, now, self.seconds))
        except Conflict:
            return "another process took it at the same moment"
        self.renewed = now
        return ""

    def renew(self, now: datetime.datetime) -> None:
        """A renewal, at most every third of the term; ApiError when the Lease is someone else's now."""
        if self.renewed is not None and now - self.renewed < datetime.timedelta(seconds=self.seconds / RENEW_FRACTION):
            return
        lease = self.read()
        if lease is None or holder_of(lease) != self.holder:
            raise ApiError(f"the Lease {self.path} is held by {holder_of(lease) or 'nobody'} now, not this process")
        self.kube.update(self.path, taken(lease, self.holder, now, self.seconds))
        self.renewed = now

    def release(self) -> None:
        """Given back, if it is still this process's (a failure to write is left to the term's end)."""
        try:
            lease = self.read()
            if lease is not None and holder_of(lease) == self.holder:
                self.kube.update(self.path, released(lease))
        except ApiError:
            pass
        self.renewed = None
