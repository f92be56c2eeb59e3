"""The program as the Python language host's process under the real engine: two costs that are not the program's
work, each measured in a preview of prod (docs/engine.md, "What a real preview costs").

**The SDK's debug messages.** The SDK logs four debug messages for every resource ("registering resource",
"resource registration prepared", "... successful", "beginning rpc": pulumi runtime/resource.py, rpc_manager.py)
and sends each one as a blocking gRPC call to the engine (`pulumi.log._log`, "If we can log synchronously, do so")
on the thread that runs the program and its event loop: 276 calls in a preview of prod, about 0.2 s of that thread
spent waiting for the engine's answers, while the registrations behind them waited too. The engine shows those
messages only under `pulumi --debug` or `-v`. Here the engine's `Log` goes through one queue and one thread of its
own. A debug message returns at once and is still sent, in the order the SDK logged it, before the program's
process exits. Info, warnings and errors stay synchronous: each waits until every message logged before it is
sent, then is sent itself, so what the user sees keeps its order and the program's last error is on the engine's
side before the program ends.

**The interpreter's exit.** When the program's process ends, Python's finalization collects garbage over every
object still alive, and the language host's `Run`, hence the preview, waits for it: 0.10 s after prod's last step
(the floor's empty program: 0.08 to 0.12 s). Everything alive when the program has registered its resources (the
modules, the validated config, the chart's CRDs, the resources and their outputs) stays alive until then anyway;
`gc.freeze()` moves it to the permanent generation, which no collection traverses, and the exit takes 0.03 s.
Objects made afterwards (the engine's answers) are collected as before.

**The SDK's wait for outstanding outputs, once per completion.** After the program's body, the SDK waits for every
`Output` it tracks (`pulumi.runtime.stack.wait_for_rpcs`, SDK 3.272): it hands all of them to `asyncio.wait(...,
FIRST_COMPLETED)`, which adds a callback to each and removes them all again, awaits what finished and starts over
with the rest. Each round costs the number of outputs still pending, and they finish a resource at a time, so the
rounds cost the square of the pool: a typed resource has an `Output` per output property (a `VmLegacy` about 90,
a local `Command` 17). At 100 domains that was 2.8 of the program's 10.6 s of CPU in a preview (issue 42,
docs/engine.md), on a 2-core machine where the engine and the providers wait for that CPU. `settle_outputs` first
waits for every tracked output and every outstanding registration in one `asyncio.wait` per generation (one callback
per task, ending at the first failure); the SDK's own loop then runs as before and finds everything done, raising
what failed exactly as it would have.

All three only under the real engine: the mocks of the offline preview and the tests answer in-process, and the tests
run the program many times in one process, where frozen objects would pile up.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import settings, stack
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc

THREAD_NAME = "gpu-pool-sdk-debug-log"


@dataclass
class _Message:
    request: engine_pb2.LogRequest
    # Set once the engine has answered (or refused) a message somebody waits for; None for a debug message.
    done: threading.Event | None = None
    response: Any = None
    error: BaseException | None = None


@dataclass
class BackgroundDebugLog:
    """Stands in for an engine client's `Log`: `send` is the client's own, called from one thread in order."""

    send: Callable[[engine_pb2.LogRequest], Any]
    _pending: deque[_Message | None] = field(default_factory=deque, init=False)
    _ready: threading.Condition = field(default_factory=threading.Condition, init=False)
    # The first debug message the engine refused: raised from the next synchronous message, where the SDK's own
    # blocking call would have raised it (a gone engine fails the program's next registration anyway).
    _refused: BaseException | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)
    _thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        # A daemon thread: the interpreter does not wait for it, close() (at exit) drains it.
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def __call__(self, request: engine_pb2.LogRequest) -> Any:
        if self._closed:
            return self.send(request)
        if request.severity == engine_pb2.DEBUG:
            self._put(_Message(request))
            return None
        done = threading.Event()
        message = _Message(request, done)
        self._put(message)
        done.wait()
        refused, self._refused = self._refused, None
        if message.error is not None:
            raise message.error
        if refused is not None:
            raise refused
        return message.response

    def close(self) -> None:
        """Sends every message still queued, then stops the thread; later messages are sent directly."""
        if self._closed:
            return
        self._put(None)
        self._thread.join()
        self._closed = True

    def _put(self, message: _Message | None) -> None:
        with self._ready:
            self._pending.append(message)
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                message = self._pending.popleft()
            if message is None:
                return
            try:
                message.response = self.send(message.request)
            except Exception as error:  # handed to whoever waits for it, or kept for the next one who does
                if message.done is None:
                    self._refused = self._refused or error
                else:
                    message.error = error
            finally:
                if message.done is not None:
                    message.done.set()


def real_engine() -> engine_pb2_grpc.EngineStub | None:
    """The engine's client when the program runs under the real engine; None under the mocks."""
    engine = settings.get_engine()
    return engine if isinstance(engine, engine_pb2_grpc.EngineStub) else None


def send_sdk_debug_messages_in_background() -> BackgroundDebugLog | None:
    """Puts the engine client's `Log` behind a BackgroundDebugLog, once; None without a real engine."""
    engine = real_engine()
    if engine is None:
        return None
    current = engine.Log
    if isinstance(current, BackgroundDebugLog):
        return current
    background = BackgroundDebugLog(current)
    # The client object itself, not the SDK's settings: every context's settings hold this same client.
    engine.Log = background
    atexit.register(background.close)
    return background


def freeze_for_exit() -> bool:
    """Every object alive now out of the garbage collector's way (gc.freeze); False, doing nothing, without a real
    engine. Call it once the program has registered its resources."""
    if real_engine() is None:
        return False
    gc.freeze()
    return True


async def settle_outputs() -> None:
    """Waits until every output and registration the SDK tracks is done, or one has failed (left to the SDK to
    raise): each `asyncio.wait` takes what is pending now, and what those create is taken in the next round."""
    rpc_manager = settings._get_rpc_manager()
    while True:
        with settings.SETTINGS.lock:
            tracked = [*settings.SETTINGS.outputs, *rpc_manager.rpcs]
        pending = [
            asyncio.ensure_future(task) for task in tracked if not (isinstance(task, asyncio.Future) and task.done())
        ]
        if not pending:
            return
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
        if any(not task.cancelled() and task.exception() is not None for task in done):
            return


@dataclass(frozen=True)
class OutputsSettledFirst:
    """Stands in for the SDK's `wait_for_rpcs`: `settle_outputs`, then the SDK's own loop (`sdk`)."""

    sdk: Callable[..., Any]

    async def __call__(self, await_all_outstanding_tasks: bool = True) -> None:
        if await_all_outstanding_tasks:
            await settle_outputs()
        await self.sdk(await_all_outstanding_tasks)


def settle_outputs_before_the_sdk_waits() -> OutputsSettledFirst | None:
    """Puts `OutputsSettledFirst` in front of the SDK's wait for outstanding outputs, once; None without a real
    engine. `run_pulumi_func` looks `wait_for_rpcs` up in its module when the program's body has returned."""
    if real_engine() is None:
        return None
    current = stack.wait_for_rpcs
    if isinstance(current, OutputsSettledFirst):
        return current
    wrapped = OutputsSettledFirst(current)
    stack.wait_for_rpcs = wrapped
    return wrapped
