"""The program as the language host's process (components/shared/language_host.py). The SDK's debug messages go to
the engine from a thread of their own: the program never waits for one, none is lost or reordered, and info,
warnings and errors stay synchronous. At the end of the program its objects are frozen for the exit, only under the
real engine.

The engine here is a recording `Log` that can be held, so each test decides when the engine answers; no test
sleeps. `tests/e2e/test_engine_preview.py` checks the same promise under the real engine."""

from __future__ import annotations

import asyncio
import atexit
import gc
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pulumi.runtime import mocks, settings, stack
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc
from pulumi.runtime.rpc_manager import RPCManager

from components.shared import language_host
from components.shared.language_host import (
    BackgroundDebugLog,
    OutputsSettledFirst,
    freeze_for_exit,
    send_sdk_debug_messages_in_background,
    settle_outputs_before_the_sdk_waits,
)

HELD_SECONDS = 20


def message(text: str, severity: engine_pb2.LogSeverity.ValueType = engine_pb2.DEBUG) -> engine_pb2.LogRequest:
    return engine_pb2.LogRequest(severity=severity, message=text)


@dataclass
class RecordingEngine:
    """The engine's `Log`: records what it receives, answers once `answering` is set, refuses what `refuse` names."""

    received: list[str] = field(default_factory=list)
    answering: threading.Event = field(default_factory=threading.Event)
    first_call: threading.Event = field(default_factory=threading.Event)
    refuse: set[str] = field(default_factory=set)
    threads: set[str] = field(default_factory=set)

    def __call__(self, request: engine_pb2.LogRequest) -> str:
        self.first_call.set()
        # A failsafe, not a pause: a `Log` that blocked its caller would otherwise hang the test.
        if not self.answering.wait(timeout=HELD_SECONDS):
            raise AssertionError(f"the engine was held {HELD_SECONDS} s: the caller waited for it")
        self.threads.add(threading.current_thread().name)
        if request.message in self.refuse:
            raise RuntimeError(f"the engine refused {request.message!r}")
        self.received.append(request.message)
        return f"answer to {request.message}"


class UnusedChannel:
    def unary_unary(self, method: str, **_: object) -> Callable[[engine_pb2.LogRequest], str]:
        def call(request: engine_pb2.LogRequest) -> str:
            raise AssertionError(f"{method} called")

        return call


@pytest.fixture
def engine() -> RecordingEngine:
    return RecordingEngine()


@pytest.fixture
def log(engine: RecordingEngine) -> Iterator[BackgroundDebugLog]:
    background = BackgroundDebugLog(engine)
    yield background
    engine.answering.set()
    background.close()


def test_a_debug_message_returns_before_the_engine_has_answered_it(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    assert log(message("registering resource: dc1-vm")) is None
    engine.first_call.wait()
    assert engine.received == []  # the engine is still holding it; the program went on
    engine.answering.set()
    log.close()
    assert engine.received == ["registering resource: dc1-vm"]
    assert engine.threads == {language_host.THREAD_NAME}


def test_a_warning_waits_for_every_earlier_debug_message_and_is_sent_before_the_call_returns(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    log(message("registering resource: dc1-vm"))
    log(message("resource registration prepared: dc1-vm"))
    engine.answering.set()
    answer = log(message("dc1: the VM has no GPU yet", engine_pb2.WARNING))
    assert answer == "answer to dc1: the VM has no GPU yet"
    assert engine.received == [
        "registering resource: dc1-vm",
        "resource registration prepared: dc1-vm",
        "dc1: the VM has no GPU yet",
    ]


@pytest.mark.parametrize("severity", [engine_pb2.INFO, engine_pb2.WARNING, engine_pb2.ERROR])
def test_info_warnings_and_errors_are_not_answered_before_the_engine_answers(
    severity: engine_pb2.LogSeverity.ValueType, engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    caller = threading.Thread(target=log, args=(message("preflight failed", severity),))
    caller.start()
    engine.first_call.wait()
    assert caller.is_alive()  # held with the engine
    engine.answering.set()
    caller.join()
    assert engine.received == ["preflight failed"]


def test_messages_reach_the_engine_in_the_order_the_sdk_logged_them(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    sent = [
        message("registering resource: dc1-vm"),
        message("a warning", engine_pb2.WARNING),
        message("resource registration prepared: dc1-vm"),
        message("resource registration successful: dc1-vm"),
        message("an error", engine_pb2.ERROR),
        message("run_pulumi_func completed"),
    ]
    engine.answering.set()
    for request in sent:
        log(request)
    log.close()
    assert engine.received == [request.message for request in sent]


def test_closing_sends_every_queued_debug_message_before_it_returns(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    for n in range(3):
        log(message(f"debug {n}"))
    engine.first_call.wait()
    closing = threading.Thread(target=log.close)
    closing.start()
    assert closing.is_alive()  # the engine has not answered the first one yet
    engine.answering.set()
    closing.join()
    assert engine.received == ["debug 0", "debug 1", "debug 2"]


def test_after_closing_a_message_is_sent_at_once_on_the_callers_thread(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    engine.answering.set()
    log.close()
    log(message("exit code 1", engine_pb2.ERROR))
    assert engine.received == ["exit code 1"]
    assert engine.threads == {threading.current_thread().name}


def test_an_error_the_engine_answers_to_a_warning_is_raised_to_the_caller(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    engine.answering.set()
    engine.refuse.add("a warning")
    with pytest.raises(RuntimeError, match="refused 'a warning'"):
        log(message("a warning", engine_pb2.WARNING))


def test_a_debug_message_the_engine_refused_is_raised_from_the_next_warning(
    engine: RecordingEngine, log: BackgroundDebugLog
) -> None:
    engine.answering.set()
    engine.refuse.add("registering resource: dc1-vm")
    log(message("registering resource: dc1-vm"))
    with pytest.raises(RuntimeError, match="refused 'registering resource: dc1-vm'"):
        log(message("a warning", engine_pb2.WARNING))
    # Raised once; the warning itself was sent.
    assert log(message("another warning", engine_pb2.WARNING)) == "answer to another warning"
    assert engine.received == ["a warning", "another warning"]


def test_the_real_engine_client_gets_the_background_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's own client class, on a channel that only hands out its methods: nothing is called or connected.
    client = engine_pb2_grpc.EngineStub(UnusedChannel())
    own_log = client.Log
    monkeypatch.setattr(settings, "get_engine", lambda: client)
    at_exit: list[Callable[[], None]] = []
    monkeypatch.setattr(atexit, "register", at_exit.append)
    try:
        first = send_sdk_debug_messages_in_background()
        assert isinstance(first, BackgroundDebugLog)
        assert first.send is own_log
        assert at_exit == [first.close]  # what is queued is sent before the process exits
        assert client.Log is first
        assert send_sdk_debug_messages_in_background() is first
    finally:
        for close in at_exit:
            close()


@pytest.mark.usefixtures("monitor")
def test_the_offline_previews_mock_engine_is_left_as_it_is() -> None:
    mock_engine = settings.get_engine()
    assert isinstance(mock_engine, mocks.MockEngine)
    assert send_sdk_debug_messages_in_background() is None
    assert not isinstance(mock_engine.Log, BackgroundDebugLog)
    assert settings.get_engine() is mock_engine


def test_under_the_real_engine_every_object_alive_at_the_end_is_frozen_for_the_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = engine_pb2_grpc.EngineStub(UnusedChannel())
    monkeypatch.setattr(settings, "get_engine", lambda: client)
    alive = {"the validated config": ["..."]}
    assert gc.get_freeze_count() == 0
    assert any(o is alive for o in gc.get_objects())  # a collection would traverse it
    try:
        assert freeze_for_exit() is True
        assert gc.get_freeze_count() > 0
        assert all(o is not alive for o in gc.get_objects())  # no collection traverses it any more
    finally:
        gc.unfreeze()  # this test process goes on


@pytest.mark.usefixtures("monitor")
def test_the_offline_preview_and_the_tests_freeze_nothing() -> None:
    # They run the program many times in one process: frozen objects would never be collected.
    assert freeze_for_exit() is False
    assert gc.get_freeze_count() == 0


# A pool's outputs: enough that a wait per completion shows, few enough for a quick test.
OUTPUTS = 300


def _waits_to_settle(wait: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, failing: int | None = None) -> int:
    """How many `asyncio.wait` calls `wait` makes while OUTPUTS tracked outputs finish one per loop iteration (the
    SDK's registrations answer one at a time), output number `failing` with an error (which `wait` must raise)."""
    calls: list[int] = []
    real_wait = asyncio.wait

    async def counting_wait(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[0]))
        return await real_wait(*args, **kwargs)

    monkeypatch.setattr(asyncio, "wait", counting_wait)
    # The SDK's state of this test alone (the mocks of other tests leave theirs).
    monkeypatch.setattr(settings.SETTINGS, "rpc_manager", RPCManager())  # type: ignore[no-untyped-call]
    monkeypatch.setattr(settings.SETTINGS, "outputs", set())

    async def program() -> None:
        loop = asyncio.get_running_loop()
        outputs = [loop.create_future() for _ in range(OUTPUTS)]
        with settings.SETTINGS.lock:
            settings.SETTINGS.outputs.update(outputs)

        async def engine_answers() -> None:
            for index, output in enumerate(outputs):
                await asyncio.sleep(0)
                if index == failing:
                    output.set_exception(ValueError(f"output {index} failed"))
                    return
                output.set_result(index)

        answers = asyncio.ensure_future(engine_answers())
        try:
            await asyncio.wait_for(wait(), timeout=HELD_SECONDS)
        finally:
            await answers
            for output in outputs:
                output.cancel()

    # Not asyncio.run: it would leave the thread without an event loop, which the SDK's mocks of later tests need.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(program())
    finally:
        loop.close()
    return len(calls)


def test_the_sdks_own_wait_for_outputs_waits_once_per_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cost this module removes: a wait over everything still pending after each completion.
    assert _waits_to_settle(stack.wait_for_rpcs, monkeypatch) >= OUTPUTS // 2


def test_settled_first_the_sdks_wait_finds_every_output_done_after_one_wait_per_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _waits_to_settle(OutputsSettledFirst(stack.wait_for_rpcs), monkeypatch) <= 2


@pytest.mark.parametrize("failing", [0, OUTPUTS // 2, OUTPUTS - 1])
def test_an_output_that_fails_is_raised_by_the_sdks_own_wait_as_before(
    failing: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The outputs after the failed one never finish: the wait must still end, with the failure.
    with pytest.raises(ValueError, match=f"output {failing} failed"):
        _waits_to_settle(OutputsSettledFirst(stack.wait_for_rpcs), monkeypatch, failing=failing)


def test_the_real_engine_gets_the_settled_wait_once(monkeypatch: pytest.MonkeyPatch) -> None:
    client = engine_pb2_grpc.EngineStub(UnusedChannel())
    monkeypatch.setattr(settings, "get_engine", lambda: client)
    sdk_wait = stack.wait_for_rpcs
    monkeypatch.setattr(stack, "wait_for_rpcs", sdk_wait)  # restored after the test
    first = settle_outputs_before_the_sdk_waits()
    assert isinstance(first, OutputsSettledFirst)
    assert first.sdk is sdk_wait
    assert stack.wait_for_rpcs is first
    assert settle_outputs_before_the_sdk_waits() is first


@pytest.mark.usefixtures("monitor")
def test_the_offline_preview_keeps_the_sdks_own_wait() -> None:
    sdk_wait = stack.wait_for_rpcs
    assert settle_outputs_before_the_sdk_waits() is None
    assert stack.wait_for_rpcs is sdk_wait
