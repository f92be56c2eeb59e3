"""What a failed preflight raises: every problem found, before anything is registered."""

from __future__ import annotations

SKIPPED_OFFLINE = "skipped: the offline preview has no Proxmox API or cluster to ask"


class PreflightError(Exception):
    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("\n".join(messages))
