"""A turn's transitions, one small function each, over the one client: what the wave (pulumi-command runs them as
the node-steps script's steps), `gpu-pool repair` (the same steps) and the watcher (its repair turn) do to a Node.
Every write of the turn's state goes through `set_state`, as k8s-operator-libs' NodeUpgradeStateProvider
ChangeNodeUpgradeState: no module outside node/ writes a turn-state value, the operator's skip label or its
initial-state mark (tests/node/test_one_writer.py).

The sequence, for every executor: take the hold -> (not Ready: stop) -> hold the operator (its skip label with the
turn's mark) -> cordon (with the operator's initial-state mark) -> drain (`kubectl drain`'s rules) -> release the
operator -> [the change: RKE2, files, a power cycle (node/power.py), the kernel] -> Ready -> gate (slots and the
pinned driver, node/gate.py) -> [the smoke test] -> record and release (the rollout's or the repair's). A step that
fails stops the turn: the node says why, stays cordoned, its state `stopped`.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from node.drain import drain as drain_pods
from node.kube import ApiError, Kube
from node.vocabulary import (
    DRIVER_REVISION_ANNOTATION,
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION,
    DRIVER_UPGRADE_SKIP_LABEL,
    REPAIRS_ANNOTATION,
    ROLLOUT_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    WAVE_CORDON_ANNOTATION,
    WAVE_SKIP_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
    TurnState,
    annotations_of,
    boot_id,
    labels_of,
    ours_cordoned,
    ready,
    ready_status,
    records_with,
    stamp,
    turn_holder,
    turn_state,
    unschedulable,
)
from node.waiting import Out, StepFailed, Waiter

NOTE_LIMIT = 1000


class HeldByOther(StepFailed):
    """Another holder's turn is at work on the node: nothing was changed."""


@dataclass
class Turn:
    """One turn on one Node: who holds it, and how it reports (`out`: its progress lines) and waits (`tick`: what
    runs at every poll of a wait, the watcher's Lease renewal)."""

    kube: Kube
    node: str
    holder: str
    # The value of the turn's cordon and operator-hold marks: the domain's name.
    mark: str
    out: Out | None = None
    clock: Callable[[], datetime.datetime] = field(default=lambda: datetime.datetime.now(datetime.UTC))
    tick: Callable[[], None] | None = None
    # The waits' pace (None: GPU_POOL_POLL_SECONDS, 10 s).
    poll: float | None = None

    @property
    def repairing(self) -> bool:
        return self.holder.startswith("repair:")

    def say(self, line: str) -> None:
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()

    def waiter(self, what: str, minutes: float) -> Waiter:
        waiter = Waiter(what, minutes, self.out, tick=self.tick)
        if self.poll is not None:
            waiter.poll = self.poll
        return waiter

    def read(self) -> dict[str, Any]:
        node = self.kube.node(self.node)
        if node is None:
            raise StepFailed(f"node {self.node} is not registered")
        return node

    def patch(self, change: Callable[[dict[str, Any]], Mapping[str, Any] | None]) -> dict[str, Any]:
        """The Node as it was before the patch that went through."""
        try:
            before, _after = self.kube.patch_node(self.node, change)
        except ApiError as error:
            raise StepFailed(f"could not write on node {self.node}: {error}") from None
        return before


# ---------------------------------------------------------------------------------------------------- state


def set_state(turn: Turn, state: TurnState) -> None:
    """The node's visible turn state: the one writer of TURN_STATE_LABEL but for the hold's own conditional patch.
    A repair's turn stays `repairing` until it ends."""

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        now = turn_state(node)
        if now == state or (now == TurnState.REPAIRING and state in (TurnState.GATING, TurnState.CHANGING)):
            return None
        return {"metadata": {"labels": {TURN_STATE_LABEL: str(state)}}}

    turn.patch(change)


def _may_take(node: Mapping[str, Any], holder: str, take_stopped: bool) -> str:
    """'' when `holder` may take the node's hold, else who holds it and why not."""
    state, other = turn_state(node), turn_holder(node)
    if state in ("", TurnState.DONE) or other == holder:
        return ""
    mine = holder.split(":", 1)[0]
    # A stopped wave's hold may be taken (its note names `gpu-pool repair`), a stopped repair's only by a repair
    # (`pulumi up` must not finish a repair's turn: FIELD-REVIEW-5 H2); the watcher takes none.
    if state == TurnState.STOPPED and take_stopped and not (other.split(":", 1)[0] == "repair" and mine == "up"):
        return ""
    return other or "an unnamed holder"


def take_hold(turn: Turn, state: TurnState, *, take_stopped: bool = True) -> dict[str, Any]:
    """A turn's first act: the node's hold (its state and holder) in one patch carrying the resourceVersion read
    with the check, so a holder that took it in between makes it fail (409) and the check is made again. Raises
    HeldByOther naming the holder. The Node as read before."""
    since = stamp(turn.clock())
    refused: list[str] = []

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        other = _may_take(node, turn.holder, take_stopped)
        if other:
            refused.append(f"{other} (turn-state {turn_state(node)})")
            return None
        return {
            "metadata": {
                "labels": {TURN_STATE_LABEL: str(state)},
                "annotations": {TURN_HOLDER_ANNOTATION: f"{turn.holder} since {since}"},
            }
        }

    before = turn.patch(change)
    if refused:
        raise HeldByOther(
            f"{turn.node} is held by {refused[-1]}: wait for that turn to end, or finish it (a repair: gpu-pool "
            f"repair {turn.node} --stack STACK --yes); a holder that is gone is released with: kubectl label node "
            f"{turn.node} --overwrite {TURN_STATE_LABEL}=done"
        )
    return before


def stop(turn: Turn, note: str, entry: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None) -> None:
    """The turn stops: the node says why (WAVE_STOPPED_ANNOTATION), its state `stopped` under the same holder, and
    it stays cordoned where the turn cordoned it (re-asserted: nothing the operator did in between uncordons it).
    `entry`: also in the repair record. `extra`: the executor's own annotations (the watcher's verdict)."""

    def change(node: dict[str, Any]) -> dict[str, Any]:
        written: dict[str, Any] = {WAVE_STOPPED_ANNOTATION: note[:NOTE_LIMIT], **(extra or {})}
        if entry is not None:
            written[REPAIRS_ANNOTATION] = records_with(node, entry, turn.clock())
        patch: dict[str, Any] = {
            "metadata": {"labels": {TURN_STATE_LABEL: str(TurnState.STOPPED)}, "annotations": written}
        }
        if ours_cordoned(node):
            patch["spec"] = {"unschedulable": True}
        return patch

    turn.patch(change)


def stop_unless_ready(turn: Turn) -> None:
    """A node that is not Ready (its kubelet stopped reporting) is not drained: a drain would wait out its timeout
    on pods stuck Terminating on an unreachable kubelet (FIELD-REVIEW-5 WRONG-3). The turn stops before it changes
    anything, and the node says why and what brings it back."""
    node = turn.read()
    if ready(node):
        return
    why = (
        f"not Ready (Ready={ready_status(node) or 'none'}): the turn stopped before its drain; bring it back with: "
        f"gpu-pool repair {turn.node} --stack STACK (a card or VM fault), or wait for it to be Ready; then pulumi up "
        "resumes the wave here"
    )
    stop(turn, why)
    raise StepFailed(f"{turn.node} is {why}")


# ---------------------------------------------------------------------------------------------------- the operator


def hold_operator(turn: Turn) -> None:
    """The GPU Operator's upgrade controller acts on every cordoned node in upgrade-required (no slots of its own),
    and its pod deletion is stricter than the drain: held off with its skip label from before the cordon until the
    drain is done (k8s-operator-libs upgrade_inplace.go SkipNodeUpgrade; FIELD-REVIEW-5 WRONG-1, FIELD-REVIEW-6
    WRONG-3). The mark says the turn set it; a skip label an admin set (no mark) is theirs, kept, never removed."""

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        if labels_of(node).get(DRIVER_UPGRADE_SKIP_LABEL) == "true" and not annotations_of(node).get(
            WAVE_SKIP_ANNOTATION
        ):
            return None
        return {
            "metadata": {
                "labels": {DRIVER_UPGRADE_SKIP_LABEL: "true"},
                "annotations": {WAVE_SKIP_ANNOTATION: turn.mark},
            }
        }

    turn.patch(change)


def release_operator(turn: Turn) -> None:
    """The skip label off again once the drain is done, where the turn set it (its mark)."""

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        if not annotations_of(node).get(WAVE_SKIP_ANNOTATION):
            return None
        return {"metadata": {"labels": {DRIVER_UPGRADE_SKIP_LABEL: None}, "annotations": {WAVE_SKIP_ANNOTATION: None}}}

    turn.patch(change)


# ---------------------------------------------------------------------------------------------------- cordon, drain


def cordon(turn: Turn, token: str) -> None:
    """One patch cordons the node and marks it as the turn's (only when it was schedulable: a node someone else
    cordoned stays theirs) and records when the turn started (`token`: a turn in progress until its end; unique,
    so a resumed turn is told from an earlier one). The same patch tells the operator the node was unschedulable
    before its upgrade, so it leaves it cordoned when it has swapped the driver: otherwise it uncordons it
    itself, before the turn's gate and smoke test ran (tests/e2e/test_driver_wave.py)."""

    def change(node: dict[str, Any]) -> dict[str, Any]:
        marks = {WAVE_TURN_ANNOTATION: token, DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true"}
        if unschedulable(node):
            return {"metadata": {"annotations": marks}}
        return {
            "metadata": {"annotations": {**marks, WAVE_CORDON_ANNOTATION: turn.mark}},
            "spec": {"unschedulable": True},
        }

    turn.patch(change)


def drain(turn: Turn, minutes: float) -> None:
    """The drain; if it fails, the node says why and the turn stops there (cordoned)."""
    try:
        drain_pods(turn.kube, turn.node, minutes, turn.out, turn.tick, turn.poll)
    except StepFailed as error:
        stop(turn, f"the drain failed (it waits up to {minutes:g}m for evictions): {error}")
        raise


def start(
    turn: Turn,
    token: str,
    drain_minutes: float,
    *,
    take_stopped: bool = True,
    before_cordon: Callable[[Turn], None] | None = None,
) -> None:
    """The turn's start as every executor runs it: hold, Ready, operator held, cordon, drain, operator released.
    `take_stopped` False (the watcher, stricter): a stopped turn's hold is a person's to finish. `before_cordon`:
    what the turn notes while it holds the node and the operator cannot have touched it yet
    (gate.note_driver_revision)."""
    take_hold(turn, TurnState.REPAIRING if turn.repairing else TurnState.DRAINING, take_stopped=take_stopped)
    stop_unless_ready(turn)
    hold_operator(turn)
    if before_cordon is not None:
        before_cordon(turn)
    cordon(turn, token)
    drain(turn, drain_minutes)
    set_state(turn, TurnState.CHANGING)
    release_operator(turn)


def uncordon_plain(turn: Turn) -> None:
    """`kubectl uncordon` (a power cycle outside a turn that cordoned a node it found schedulable)."""
    turn.patch(lambda node: {"spec": {"unschedulable": None}} if unschedulable(node) else None)


def cordon_plain(turn: Turn) -> bool:
    """`kubectl cordon`; whether the node was cordoned already."""
    before = turn.patch(lambda node: None if unschedulable(node) else {"spec": {"unschedulable": True}})
    return unschedulable(before)


# ---------------------------------------------------------------------------------------------------- Ready


def wait_ready(turn: Turn, minutes: float, old_boot: str | None = None) -> None:
    """The node Ready again (with a new boot id when `old_boot` is given: after a power cycle)."""

    def check() -> tuple[bool, str, str]:
        node = turn.kube.node(turn.node)
        if node is None:
            return (
                False,
                "not registered",
                (
                    "the node never registered with RKE2: the first boot names the step it stopped at on the "
                    "VM's console ('gpu-pool first boot: STOPPED at <step> (<url>): <error>': the Proxmox console, "
                    "or qm terminal <vmid> on its host) and in /var/lib/gpu-pool/first-boot/<step>.log; then "
                    "journalctl -u rke2-agent, the join token and gpu-pool:rke2.serverUrl"
                ),
            )
        if old_boot is not None and boot_id(node) == old_boot:
            return (
                False,
                "not back yet",
                f"the VM started but {turn.node} did not come back Ready: check the VM console",
            )
        if not ready(node):
            return (
                False,
                "registered, not Ready",
                (
                    f"the node registered but the kubelet is not Ready: kubectl describe node {turn.node} "
                    "(CNI, disk pressure, kubelet)"
                ),
            )
        return True, "Ready", ""

    what = (
        f"node {turn.node} to register and be Ready"
        if old_boot is None
        else f"{turn.node} to come back Ready after the power cycle"
    )
    turn.waiter(what, minutes).until(check)


# ---------------------------------------------------------------------------------------------------- the end


def _ending(node: Mapping[str, Any], record: Mapping[str, str | None]) -> dict[str, Any]:
    """The turn's end in one patch: its state done (which releases the hold), its marks gone, the operator's
    initial-state mark too (the operator removes it when it finishes an upgrade; a turn with no driver change ends
    it here), and, only where the turn cordoned the node, uncordoned. One patch: no interruption leaves the node
    uncordoned with its turn open, or cordoned with no mark saying whose."""
    written: dict[str, Any] = {
        WAVE_TURN_ANNOTATION: None,
        WAVE_STOPPED_ANNOTATION: None,
        DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: None,
        DRIVER_REVISION_ANNOTATION: None,
        **record,
    }
    change: dict[str, Any] = {"metadata": {"labels": {TURN_STATE_LABEL: str(TurnState.DONE)}, "annotations": written}}
    if ours_cordoned(node):
        written[WAVE_CORDON_ANNOTATION] = None
        change["spec"] = {"unschedulable": None}
    return change


def finish_rollout(turn: Turn, state: Mapping[str, str]) -> str:
    """The wave turn's last step, after its gate: the state rolled to recorded (ROLLOUT_ANNOTATION), the turn ended.
    What the node is now, in a line."""
    record = json.dumps(dict(state), sort_keys=True, separators=(",", ":"))
    before = turn.patch(lambda node: _ending(node, {ROLLOUT_ANNOTATION: record}))
    if ours_cordoned(before) or not unschedulable(before):
        return f"{turn.node}: rolled out, serving"
    return f"{turn.node}: rolled out; cordoned by someone else before the wave, left cordoned"


def finish_repair(turn: Turn, entry: Mapping[str, str], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A repair's last step, after its checks: the repair recorded, the turn ended (`extra`: the executor's own
    annotations, the watcher's verdict cleared). The Node as it was before."""
    return turn.patch(
        lambda node: _ending(node, {REPAIRS_ANNOTATION: records_with(node, entry, turn.clock()), **(extra or {})})
    )


def record(turn: Turn, entry: Mapping[str, str]) -> dict[str, Any]:
    """`entry` (with the time) appended to the Node's repair record. The Node as it was before."""
    return turn.patch(
        lambda node: {"metadata": {"annotations": {REPAIRS_ANNOTATION: records_with(node, entry, turn.clock())}}}
    )
