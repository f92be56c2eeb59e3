"""A mock resource monitor that keeps every registration exactly as the SDK sent it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped]
from pulumi.runtime import mocks, rpc

SECRET_SIG = rpc._special_sig_key
SECRET_VALUE = rpc._special_secret_sig
RESOURCE_SIG = rpc._special_resource_sig
UNKNOWN = rpc.UNKNOWN


def plain(value: Any) -> Any:
    """A protobuf Struct/Value as plain Python: ints back from floats, secret envelopes and unknowns kept."""
    if hasattr(value, "DESCRIPTOR"):
        value = json_format.MessageToDict(value)
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == RESOURCE_SIG:
            return value.get("urn", "")
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIG) == SECRET_VALUE


def reveal(value: Any) -> Any:
    """For tests: the value inside every secret envelope (asserting what a secret holds, not printing it)."""
    if is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {key: reveal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [reveal(item) for item in value]
    return value


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    protect: bool
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    delete_before_replace: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    # Deleted from the state only, never from the cluster (the CRDs: deleting one deletes every object of its kind).
    retain_on_delete: bool = False


@dataclass
class Invocation:
    token: str
    args: dict[str, Any]


@dataclass
class Recording:
    """Everything a program registered, in a form tests and the preview renderer can read."""

    registrations: list[Registration] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    stack_outputs: dict[str, Any] = field(default_factory=dict)
    stack_urn: str = ""

    def by_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.registrations if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def urn_of(self, name: str) -> str:
        return self.named(name).urn


class PlanMocks(mocks.Mocks):
    """Resources echo their inputs; ids stay unknown in a preview, as the engine would leave them."""

    def __init__(self, preview: bool, invoke: Callable[[mocks.MockCallArgs], dict[str, Any]] | None = None) -> None:
        self.preview = preview
        self.invoke = invoke

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        resource_id = None if self.preview else f"{args.name}-id"
        return resource_id, dict(args.inputs)

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        if self.invoke is None:
            raise NotImplementedError(f"no mock answer for invoke {args.token}")
        return self.invoke(args), []


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, plan_mocks: PlanMocks) -> None:
        super().__init__(plan_mocks)
        self.recording = Recording()
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        registration = Registration(
            urn=response.urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            custom=bool(request.custom),
            protect=bool(request.protect),
            provider=request.provider,
            dependencies=sorted(request.dependencies),
            property_dependencies={k: sorted(v.urns) for k, v in request.propertyDependencies.items()},
            inputs=plain(request.object),
            delete_before_replace=bool(request.deleteBeforeReplace),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            retain_on_delete=bool(request.retainOnDelete),
        )
        with self._lock:
            if request.type == "pulumi:pulumi:Stack":
                self.recording.stack_urn = response.urn
            else:
                self.recording.registrations.append(registration)
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if request.urn == self.recording.stack_urn:
            self.recording.stack_outputs = plain(request.outputs)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]

    def Invoke(self, request: Any) -> Any:
        with self._lock:
            self.recording.invocations.append(Invocation(request.tok, plain(request.args)))
        return super().Invoke(request)  # type: ignore[no-untyped-call]
