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

Both only under the real engine: the mocks of the offline preview and the tests answer in-process, and the tests
run the program many times in one process, where frozen objects would pile up.
"""

from __future__ import annotations

import atexit
import gc
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import settings
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
