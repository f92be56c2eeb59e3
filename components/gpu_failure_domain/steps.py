"""A domain's steps as data: their names (one vocabulary), what each kind of step carries, and the resource options.

`Step` is a tagged union: one dataclass per kind of resource, each with exactly the fields that kind needs, so
nothing reads an optional field and asserts it is set. The component (component.py) registers each kind in one
`match` that ends in `typing.assert_never`: a new kind without its branch fails mypy.

Two vocabularies, one place:
- `StepName`: the plan's steps. The resource is `<domain>-<name>`, a URN in users' state, so a name never changes.
- `ScriptStep`: what the node-steps script runs (`GPU_POOL_STEP`, node_steps_script.py's `STEPS`). The script is
  a packed payload of node/ and its own module, run with `python3 -c`, so it imports nothing of components/; its
  words are also in every such step's environment in users' state, so they keep the script's own names
  (tests/gpu_failure_domain/test_node_steps.py proves the script's table names exactly these).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Literal, Protocol

# What a step may wait for on the cluster-wide platform (components/shared/platform_handles.py).
PlatformWait = Literal["time-slicing-config", "operator", "smoke-namespace", "steering-policy"]
SHELL = ("/bin/sh", "-c")


class StepName(StrEnum):
    """Every step's name, declared once: the resource is `<domain>-<name>` (a URN in users' state: never renamed),
    and `make diff` and the tests read them from here."""

    PCI_MAPPING = "pci-mapping"
    CLOUD_INIT = "cloud-init"
    NODE_CLEANUP = "node-cleanup"
    VM = "vm"
    RETIRE = "retire"
    RKE2_LOGIN = "rke2-login"
    KERNEL_LOGIN = "kernel-login"
    WAVE_DRAIN = "wave-drain"
    KERNEL_DRAIN = "kernel-drain"
    RKE2_UPGRADE = "rke2-upgrade"
    # A changed proxy or registry mirrors: the egress files written over SSH, rke2-agent restarted.
    RKE2_FILES = "rke2-files"
    PLUGIN_RESTART = "device-plugin-restart"
    POWER_CYCLE = "power-cycle"
    NODE_READY = "node-ready"
    NODE_LABELS = "node-labels"
    NODE_TAINT = "node-taint"
    KERNEL_INSTALL = "kernel-install"
    KERNEL_REBUILD = "kernel-driver-rebuild"
    # A repair's check of the node after its power cycle (over SSH).
    NODE_CHECK = "node-check"
    GPU_READY = "gpu-ready"
    SMOKE_TEST = "cuda-smoke-test"
    WAVE_GATE = "wave-gate"
    ROLLOUT = "rollout"


class ScriptStep(StrEnum):
    """What the node-steps script does for a step (its `GPU_POOL_STEP`): the wave's gate runs `gpu-ready` too, a
    repair's smoke test `smoke-test` and a repair's last step `repair-done`."""

    NODE_READY = "node-ready"
    GPU_READY = "gpu-ready"
    POWER_CYCLE = "power-cycle"
    KERNEL_REBUILD = "kernel-rebuild"
    SMOKE_TEST = "smoke-test"
    REPAIR_DONE = "repair-done"
    # A turn's start (the hold, the operator held off, the cordon, the drain) and a wave turn's end (its record).
    DRAIN = "drain"
    ROLLOUT = "rollout"


class SecretInput(Protocol):
    """A remote step's standard input from the secrets it writes: (registryAuth, proxyAuth), each None if not set."""

    def __call__(self, registry_auth: str | None, proxy_auth: str | None = None) -> str: ...


@dataclass(frozen=True)
class Command:
    """What a `local` or `remote` step runs (pulumi-command): create, update and delete, and what reruns it."""

    create: str
    # None: pulumi-command runs `create` again on an update ("If empty, the create command will be executed
    # instead", provider/pkg/provider/{local,remote}/commandController.go Update, v1.2.1). A step whose update is
    # its create leaves it unset: the node-steps script is 31 KB, and sending it twice per step made a third of
    # every preview's bytes, each copy kept twice more in the state (docs/engine.md).
    update: str | None = None
    delete: str | None = None
    interpreter: tuple[str, ...] | None = SHELL
    environment: Mapping[str, str] = field(default_factory=dict)
    # The Proxmox credential (a secret Output) joins the environment at registration.
    proxmox_credentials: bool = False
    triggers: tuple[str, ...] = ()
    # Steps whose resource id is a trigger too (node-ready runs again for a new VM).
    id_triggers: tuple[str, ...] = ()
    # A remote step that reads files made from the registry credentials and the proxy's login (gpu-pool:registryAuth
    # and proxyAuth, secret Outputs the component holds) on its standard input: this renders that input from the
    # secrets' values (None: not set). A secret never travels in the command's text.
    stdin_from_registry_auth: SecretInput | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Options:
    """The resource options a step asks for beyond its dependencies and provider (which its kind decides)."""

    # None: not set (the engine's default); the VM always sets it, from the domain's `protect`.
    protect: bool | None = None
    ignore_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    # How long the provider awaits the resource's creation (a Job: until it completes).
    create_timeout_seconds: int | None = None


@dataclass(frozen=True, kw_only=True)
class _Step:
    """What every step has: its name, one line saying what it does, and what it waits for."""

    name: str
    does: str
    waits_for: tuple[str, ...] = ()
    platform: tuple[PlatformWait, ...] = ()
    # Waits for the previous batch of the wave (its domains' `rollout` steps).
    after_previous_batch: bool = False
    # Part of the turn: registered only in the `up` that runs it.
    turn_step: bool = False
    options: Options = Options()


@dataclass(frozen=True, kw_only=True)
class PciMappingStep(_Step):
    """proxmoxve.hardware.mapping.Pci: one card's cluster-wide resource mapping."""

    kind: ClassVar[Literal["pci-mapping"]] = "pci-mapping"
    card: int
    args: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class CloudInitStep(_Step):
    """proxmoxve.FileLegacy: the VM's first-boot user data, a snippet whose text holds the join token."""

    kind: ClassVar[Literal["cloud-init"]] = "cloud-init"
    args: Mapping[str, Any]
    file_name: str
    # The snippet's text from the join token and the registry credentials, if any (secrets the component holds as
    # Outputs).
    # (join token, registry credentials, proxy login) -> the snippet's text.
    user_data: Callable[[str, str | None, str | None], str] = field(compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class VmStep(_Step):
    """proxmoxve.VmLegacy: the GPU worker VM."""

    kind: ClassVar[Literal["vm"]] = "vm"
    args: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class NodeLabelsStep(_Step):
    """A server-side-applied NodePatch of the node's labels (components/shared/kubernetes_objects.py)."""

    kind: ClassVar[Literal["node-labels"]] = "node-labels"
    manifest: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class SmokeJobStep(_Step):
    """The smoke test's Job, which pulumi-kubernetes awaits until it completes."""

    kind: ClassVar[Literal["smoke-test"]] = "smoke-test"
    manifest: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class LocalStep(_Step):
    """pulumi-command's local.Command, where `pulumi up` runs."""

    kind: ClassVar[Literal["local"]] = "local"
    command: Command


@dataclass(frozen=True, kw_only=True)
class RepairSmokeStep(LocalStep):
    """A repair's smoke test: a local step whose command creates this Job (the stack's, under a name of the
    repair's own) and waits for it; it is registered as the local step it is."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class RemoteStep(_Step):
    """pulumi-command's remote.Command, over SSH on the VM (the stack's key, or the ssh-agent)."""

    kind: ClassVar[Literal["remote"]] = "remote"
    command: Command
    host: str
    user: str


Step = PciMappingStep | CloudInitStep | VmStep | NodeLabelsStep | SmokeJobStep | LocalStep | RemoteStep
# The steps that run a command: what `gpu-pool repair` runs itself (day2/repair_run.py).
CommandStep = LocalStep | RemoteStep
