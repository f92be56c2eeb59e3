"""What a domain's worker is rolled to, and the commands a day-2 turn runs on its Node.

A domain's *rollout state* is what its GPU worker was last rolled to and gated on: the RKE2 release, the kernel
pin, the VM's cold-start settings and mapped card, the driver and the sharing profile's content. A turn's last
step writes it on the Node (observed.ROLLOUT_ANNOTATION), so the next `pulumi preview` knows from the cluster
what each worker runs (turns.py decides each domain's turn from it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import shlex
from collections.abc import Mapping
from urllib.parse import urlsplit

from components.gpu_failure_domain.cloud_init import (
    EGRESS_FILES,
    RKE2_INSTALL_URL,
    SOURCES_HEADER,
    SYSTEM_TRUSTED_CA_FILE,
    UBUNTU_ARCHIVE,
    apt_sources_file,
    egress_files,
)
from components.gpu_failure_domain.node_steps import mapped_device
from components.gpu_failure_domain.observed import (
    ROLLOUT_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    WAVE_CORDON_ANNOTATION,
    WAVE_SKIP_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)
from components.gpu_failure_domain.proxmox_vm import reboot_settings
from components.gpu_failure_domain.registries import REGISTRY_TLS_DIR, RKE2_REGISTRIES_FILE
from config.failure_domain import FailureDomainConfig
from config.proxy import ProxyConfig, reached_directly
from config.rke2 import Rke2InstallerConfig
from config.rollout import DRAIN_TIMEOUT_SECONDS
from config.stack import StackConfig
from knowledge.gpu_operator import (
    DEVICE_PLUGIN_APP,
    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION,
    DRIVER_UPGRADE_SKIP_LABEL,
    GPU_FEATURE_DISCOVERY_APP,
    OPERAND_APP_LABEL,
)

# What each rollout component's change does to a worker, in the words `make diff` uses; the keys of the state.
CHANGE_WORDS: Mapping[str, str] = {
    "rke2": "RKE2 agent upgrade",
    "kernel": "kernel upgrade and reboot",
    "vm": "VM power cycle (cold-start settings or card)",
    "driver": "driver upgrade (the operator's, on the drained node only)",
    "sharing": "device plugin and GPU Feature Discovery restart (sharing profile)",
    "files": "proxy, registry and apt mirror files rewritten, rke2-agent restarted (cloud-init runs once)",
}
CHANGE_KEYS: tuple[str, ...] = tuple(CHANGE_WORDS)
# How long a drain may wait for pods to leave (PodDisruptionBudgets are respected; evictions are retried).
DRAIN_TIMEOUT = f"{DRAIN_TIMEOUT_SECONDS // 60}m"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def rollout_state(domain: FailureDomainConfig, stack: StackConfig) -> dict[str, str]:
    """What a domain's worker is rolled to once its turn is done (stable JSON: it is written on the Node)."""
    return {
        "rke2": stack.rke2.version,
        "kernel": domain.kernel or "",
        "vm": _digest([reboot_settings(domain), mapped_device(domain)]),
        "driver": stack.gpu_operator.driver_version,
        "sharing": f"{domain.sharing}@{_digest(stack.sharing_profiles[domain.sharing].model_dump(mode='json'))}",
        # Only where the stack sets a proxy or mirrors: a Node recorded without the key has none, so a stack
        # without them records (and plans) exactly what it did before the key existed.
        **({"files": _digest(files)} if (files := domain_egress_files(domain, stack)) else {}),
    }


def guest_os(stack: StackConfig) -> str:
    # The proxmox model sets it from the cloud image's name or requires it; the default only types the fallback.
    return stack.proxmox.guest_os or "ubuntu-24.04"


def domain_egress_files(domain: FailureDomainConfig, stack: StackConfig) -> list[dict[str, str]]:
    return egress_files(
        domain, stack.rke2, stack.proxy, stack.mirrors, stack.apt_mirror, guest_os(stack), stack.trusted_ca
    )


def archive_sources(stack: StackConfig) -> dict[str, str]:
    """The release's sources without a mirror: Ubuntu's archive, what a new VM's cloud-init writes."""
    return apt_sources_file(UBUNTU_ARCHIVE, guest_os(stack))


# The first lines of the release's sources as gpu-pool's files turn and cloud-init's apt module write them: a file
# with neither was written by hand, and a turn without a mirror leaves it alone.
GENERATED_SOURCES_MARKS = (SOURCES_HEADER.splitlines()[0], "## Note, this file is written by cloud-init on first boot")


def node_files_command(files: list[dict[str, str]], archive: dict[str, str]) -> str:
    """Runs on the VM over SSH (a drained node): the egress files the stack asks for written, the others it owns
    removed (a proxy taken out of the stack leaves none behind), then rke2-agent restarted to read them (its unit
    reads /etc/default/rke2-agent at start, and RKE2 turns registries.yaml into containerd's hosts at start).
    The release's apt sources are never removed (apt would have none): without a mirror, `archive` (Ubuntu's own,
    as a new VM's cloud-init writes it) replaces a file gpu-pool or cloud-init wrote, and a hand-written one is
    left alone. The content travels base64-encoded: a proxy password's quotes reach the file as written. Each file
    is written beside its place and renamed, so a failed write never leaves half a file."""
    wanted = {file["path"]: file for file in files}
    # registries.yaml and the TLS files it names arrive on stdin (cloud_init.registry_files as
    # registries.secret_files_payload: they may carry gpu-pool:registryAuth), never in this text.
    parts = ["set -e", "payload=$(cat)", _write_payload()]
    for path in EGRESS_FILES:
        file, quoted = wanted.get(path), shlex.quote(path)
        if path not in (RKE2_REGISTRIES_FILE, SYSTEM_TRUSTED_CA_FILE):
            parts.append(_write(file) if file is not None else f"sudo rm -f {quoted}")
    parts.append(_system_trust(wanted.get(SYSTEM_TRUSTED_CA_FILE)))
    mirror, quoted = wanted.get(archive["path"]), shlex.quote(archive["path"])
    marks = " ".join(f"-e {shlex.quote('^' + mark)}" for mark in GENERATED_SOURCES_MARKS)
    left = shlex.quote(f"{archive['path']} was written by hand: left as it is")
    parts.append(
        _write(mirror)
        if mirror is not None
        else f"if [ ! -e {quoted} ] || grep -q {marks} {quoted}; then {_write(archive)}; else echo {left}; fi"
    )
    parts += ["sudo systemctl restart rke2-agent", "echo 'egress files written, rke2-agent restarted'"]
    return "; ".join(parts)


def _write(file: Mapping[str, str]) -> str:
    """One file written beside its place, then renamed over it."""
    path = file["path"]
    quoted = shlex.quote(path)
    encoded = base64.b64encode(file["content"].encode()).decode()
    write = f"sudo sh -c {shlex.quote(f'umask 077; cat > {quoted}.new')}"
    steps = [f"sudo mkdir -p {shlex.quote(posixpath.dirname(path))}", f"echo {encoded} | base64 -d | {write}"]
    steps += [f"sudo chmod {file['permissions']} {quoted}.new", f"sudo mv {quoted}.new {quoted}"]
    return "; ".join(steps)


# Where cloud-init's ca_certs module wrote the lab CA at first boot (cc_ca_certs: cloud-init-ca-cert-<n>.crt, or
# cloud-init-ca-certs.crt before 23.x), filled only from gpu-pool's user data.
CLOUD_INIT_CA_FILES = "/usr/local/share/ca-certificates/cloud-init-ca-cert*.crt"


def _system_trust(ca: Mapping[str, str] | None) -> str:
    """The lab CA into the VM's system store (update-ca-certificates: curl, apt and containerd read its bundle), in
    place of the copy cloud-init wrote at first boot; or, once the stack has none, out of it."""
    ours = shlex.quote(SYSTEM_TRUSTED_CA_FILE)
    if ca is not None:
        return f"{_write(ca)}; sudo rm -f {CLOUD_INIT_CA_FILES}; sudo update-ca-certificates >/dev/null"
    return (
        f"if [ -e {ours} ] || ls {CLOUD_INIT_CA_FILES} >/dev/null 2>&1; then sudo rm -f {ours} {CLOUD_INIT_CA_FILES}; "
        "sudo update-ca-certificates --fresh >/dev/null; fi"
    )


def _write_payload() -> str:
    """The files stdin carries, `<path> <mode> <base64>` a line, each written beside its place and renamed; the
    TLS files of a host no longer named are removed, and registries.yaml when stdin has none."""
    registries, tls = shlex.quote(RKE2_REGISTRIES_FILE), shlex.quote(REGISTRY_TLS_DIR)
    write = (
        'sudo mkdir -p "$(dirname "$path")"; printf %s "$data" | base64 -d | '
        """sudo sh -c 'umask 077; cat > "$1.new"' _ "$path"; """
        'sudo chmod "$mode" "$path.new"; sudo mv "$path.new" "$path"'
    )
    return (
        f"sudo rm -rf {tls}; "
        f'printf "%s\\n" "$payload" | while read -r path mode data; do [ -n "$path" ] || continue; {write}; done; '
        f'printf "%s\\n" "$payload" | grep -q "^{RKE2_REGISTRIES_FILE} " || sudo rm -f {registries}'
    )


def apt_mirror_check_command(sources: Mapping[str, str], proxy: ProxyConfig | None) -> str:
    """Runs on the VM over SSH before the drain of a files turn with `gpu-pool:aptMirror`: apt itself fetches the
    release's signed indexes with the sources the turn will write and the proxy it will leave (none: DIRECT), into
    a folder of its own, so neither the VM's sources nor its package lists change. `--error-on=any` makes a
    mirror that does not answer, or lacks the release, fail (apt-get update only warns of those by default). A
    mirror the VM cannot use stops the wave here, naming it, with nothing drained."""
    # apt reads a sources part by its extension: deb822 `.sources`, one-line `.list`.
    part = "check.sources" if sources["path"].endswith(".sources") else "check.list"
    encoded = base64.b64encode(sources["content"].encode()).decode()
    urls = {"http": proxy.http if proxy else None, "https": proxy.https if proxy else None}
    proxies = " ".join(f"-o Acquire::{scheme}::Proxy={shlex.quote(url or 'DIRECT')}" for scheme, url in urls.items())
    uris = sorted({line.split()[1] for line in sources["content"].splitlines() if line.startswith(("URIs:", "deb "))})
    # A mirror NO_PROXY reaches directly goes direct, as the files turn's apt settings say (apt never reads NO_PROXY).
    hosts = dict.fromkeys(urlsplit(uri).hostname or "" for uri in uris)
    direct = [host for host in hosts if host and proxy is not None and proxy.enabled and reached_directly(proxy, host)]
    proxies += "".join(
        f" -o Acquire::{scheme}::Proxy::{host}=DIRECT" for host in direct for scheme in ("http", "https")
    )
    failed = shlex.quote(
        f"gpu-pool: apt on this VM cannot read the release from gpu-pool:aptMirror ({', '.join(uris)}): apt's last "
        "lines above say why (a mirror that lacks the release, or a proxy that does not reach it: apt sends it "
        "through gpu-pool:proxy); nothing was drained\n"
    )
    options = (
        '-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$check/parts" '
        '-o Dir::State::Lists="$check/lists" -o Dir::Cache="$check/cache" '
        # The throwaway folder is the SSH user's: apt's download sandbox user could not write there.
        "-o APT::Sandbox::User=root"
    )
    return (
        'set -e; check=$(mktemp -d); mkdir -p "$check/parts" "$check/lists/partial" "$check/cache/archives/partial"; '
        f'echo {encoded} | base64 -d > "$check/parts/{part}"; '
        f'if ! sudo apt-get update -q --error-on=any {options} {proxies} >"$check/said" 2>&1; then '
        f'tail -n 5 "$check/said" >&2; printf {failed} >&2; sudo rm -rf "$check"; exit 1; fi; '
        f'sudo rm -rf "$check"; echo {shlex.quote("apt reads the release from " + ", ".join(uris))}'
    )


def _patch(kubectl: str, node: str, patch: Mapping[str, object]) -> str:
    return f"{kubectl} patch node {shlex.quote(node)} --type=merge -p {shlex.quote(json.dumps(patch))} >/dev/null"


def _drain(kubectl: str, node: str) -> str:
    return f"{kubectl} drain {shlex.quote(node)} --ignore-daemonsets --delete-emptydir-data --timeout={DRAIN_TIMEOUT}"


def _unschedulable(kubectl: str, node: str) -> str:
    return f"\"$({kubectl} get node {shlex.quote(node)} -o jsonpath='{{.spec.unschedulable}}')\""


def _jsonpath(kind: str, key: str) -> str:
    return "{.metadata." + kind + "." + key.replace(".", "\\.") + "}"


def turn_state_command(node: str, kubectl: str, state: str) -> str:
    """Sets the node's visible turn state (observed.TURN_STATE_LABEL)."""
    return f"{kubectl} label node {shlex.quote(node)} --overwrite {TURN_STATE_LABEL}={state} >/dev/null"


def take_hold_command(node: str, kubectl: str, holder: str, state: str) -> str:
    """A turn's first act: take the node's hold, or fail naming who has it. Another holder at work (draining,
    changing, gating, repairing) keeps it; a stopped wave's hold may be taken (its wave-stopped note names `gpu-pool
    repair`), a stopped repair's only by a repair (`pulumi up` must not finish a repair's turn: FIELD-REVIEW-5 H2).
    The patch carries the resourceVersion read with the check, so a holder that took it in between makes it fail
    (409 Conflict) instead of both going on."""
    quoted = shlex.quote(node)
    path = shlex.quote(
        "{.metadata.resourceVersion}|"
        + _jsonpath("labels", TURN_STATE_LABEL)
        + "|"
        + _jsonpath("annotations", TURN_HOLDER_ANNOTATION)
    )
    mine = holder.split(":", 1)[0]
    take = json.dumps(
        {
            "metadata": {
                "resourceVersion": "%s",
                "labels": {TURN_STATE_LABEL: state},
                "annotations": {TURN_HOLDER_ANNOTATION: f"{holder} since %s"},
            }
        }
    )
    held = (
        f"gpu-pool: {node} is held by $holder (turn-state $state): wait for that turn to end, or finish it (a repair: "
        f"gpu-pool repair {node} --stack STACK --yes); a holder that is gone is released with: kubectl label node "
        f"{node} --overwrite {TURN_STATE_LABEL}=done"
    )
    # A 409 from anything else that wrote the Node (the kubelet's status reports and the operator's labels move its
    # resourceVersion too) reads it again and checks the hold again: only another holder stops the turn.
    return (
        "attempt=0; while :; do attempt=$((attempt + 1)); "
        f"current=$({kubectl} get node {quoted} -o jsonpath={path}); "
        "rv=${current%%|*}; rest=${current#*|}; state=${rest%%|*}; holder=${rest#*|}; "
        'case "$state" in ""|done) ;; *) '
        f'if [ "${{holder%% since *}}" != {shlex.quote(holder)} ] && '
        f'{{ [ "$state" != stopped ] || [ "${{holder%%:*}}" = repair -a {mine} = up ]; }}; then '
        f'echo "{held}" >&2; exit 1; fi;; esac; '
        f'take=$(printf {shlex.quote(take)} "$rv" "$started"); '
        f'if refused=$({kubectl} patch node {quoted} --type=merge -p "$take" 2>&1 >/dev/null); then break; fi; '
        'case "$refused" in *"the object has been modified"*|*Conflict*) [ "$attempt" -lt 10 ] && continue;; esac; '
        'echo "$refused" >&2; '
        f'echo "gpu-pool: {node} changed while its hold was taken (another holder?): kubectl get node {node} '
        f'-L {TURN_STATE_LABEL}" >&2; exit 1; done; '
    )


def _drain_or_stop(kubectl: str, node: str) -> str:
    """The drain; if it fails, the node says why and the turn stops there."""
    quoted = shlex.quote(node)
    # A node a drain leaves cordoned says why: a PodDisruptionBudget that never allowed, a pod that will not leave.
    # kubectl's last `error:` line names the pods it refused (a bare pod: "cannot delete Pods that declare no
    # controller (use --force to override): NS/NAME", kubectl pkg/drain/filters.go); it goes into the note as is.
    # The drain's stderr reaches the step's log as it is written (through tee, kept for the note): a drain that
    # waits on a PodDisruptionBudget says so while it waits, not 15 minutes later. POSIX sh has no pipefail, so
    # the drain's exit status travels through a file. `$why` is expanded, never parsed again by the shell.
    stopped = (
        shlex.quote(f"{WAVE_STOPPED_ANNOTATION}=the drain failed (it waits up to {DRAIN_TIMEOUT} for evictions): ")
        + '"$why"'
        + shlex.quote(f"; kubectl get pods -A --field-selector spec.nodeName={node}; kubectl get pdb -A")
    )
    return (
        "err=$(mktemp); status=$(mktemp); "
        f'{{ {{ {_drain(kubectl, node)} 2>&1 1>&3 3>&-; echo $? >"$status"; }} | tee "$err" >&2; }} 3>&1; '
        'if [ "$(cat "$status")" != 0 ]; then '
        """why=$(grep '^error:' "$err" | tail -n 1 | cut -c 1-400); rm -f "$err" "$status"; """
        f"{kubectl} annotate node {quoted} --overwrite {stopped} >/dev/null; "
        f"{turn_state_command(node, kubectl, 'stopped')}; exit 1; fi; "
        'rm -f "$err" "$status"; '
    )


def wave_drain_command(node: str, kubectl: str, domain: str, holder: str = "up") -> str:
    """A turn's start: one patch cordons the node and marks it as the wave's (only when it was schedulable: a node
    someone else cordoned stays theirs) and records when the turn started (a turn in progress until its last
    step), then the drain. The time makes each turn's start unique, so a resumed turn is told from an earlier one.
    The same patch tells the GPU Operator's upgrade controller the node was unschedulable before its upgrade, so it
    leaves the node cordoned when it has swapped the driver: otherwise it uncordons the node itself, before the
    turn's gate and smoke test ran (seen on the operator's own controller in tests/e2e/test_driver_wave.py).
    """
    mine = json.dumps(
        {
            "metadata": {
                "annotations": {
                    WAVE_CORDON_ANNOTATION: domain,
                    WAVE_TURN_ANNOTATION: "%s",
                    DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true",
                }
            },
            "spec": {"unschedulable": True},
        }
    )
    theirs = json.dumps(
        {"metadata": {"annotations": {WAVE_TURN_ANNOTATION: "%s", DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: "true"}}}
    )
    quoted = shlex.quote(node)
    # A node that is not Ready (its kubelet stopped reporting) is not drained: `kubectl drain` would wait out its
    # timeout on pods stuck Terminating on an unreachable kubelet (FIELD-REVIEW-5 WRONG-3). The turn stops before
    # it changes anything, and the node says why and what brings it back.
    not_ready = (
        f"not Ready (Ready=$ready): the turn stopped before its drain; bring it back with: gpu-pool repair {node} "
        "--stack STACK (a card or VM fault), or wait for it to be Ready; then pulumi up resumes the wave here"
    )
    ready_path = shlex.quote('{.status.conditions[?(@.type=="Ready")].status}')
    ready_check = (
        f"ready=$({kubectl} get node {quoted} -o jsonpath={ready_path}); "
        'if [ "$ready" != True ]; then '
        f'{kubectl} annotate node {quoted} --overwrite "{WAVE_STOPPED_ANNOTATION}={not_ready}" >/dev/null; '
        f"{turn_state_command(node, kubectl, 'stopped')}; "
        f'echo "gpu-pool: {node} is {not_ready}" >&2; exit 1; fi; '
    )
    repairing = holder.startswith("repair:")
    # The GPU Operator's upgrade controller acts on every cordoned node in upgrade-required (no slots of its own),
    # and its pod deletion is stricter than this drain: held off with its skip label from before the cordon until
    # the drain is done (k8s-operator-libs upgrade_inplace.go SkipNodeUpgrade; FIELD-REVIEW-5 WRONG-1). The mark
    # says the wave set it; a skip label an admin set (no mark) is theirs, kept and never removed.
    skip_path = shlex.quote("{.metadata.labels." + DRIVER_UPGRADE_SKIP_LABEL.replace(".", "\\.") + "}")
    held_path = shlex.quote("{.metadata.annotations." + WAVE_SKIP_ANNOTATION.replace(".", "\\.") + "}")
    hold = {"metadata": {"labels": {DRIVER_UPGRADE_SKIP_LABEL: "true"}, "annotations": {WAVE_SKIP_ANNOTATION: domain}}}
    release = {"metadata": {"labels": {DRIVER_UPGRADE_SKIP_LABEL: None}, "annotations": {WAVE_SKIP_ANNOTATION: None}}}
    hold_operator = (
        f"skip=$({kubectl} get node {quoted} -o jsonpath={skip_path}); "
        f"held=$({kubectl} get node {quoted} -o jsonpath={held_path}); "
        f'if [ "$skip" != true ] || [ -n "$held" ]; then {_patch(kubectl, node, hold)}; fi; '
    )
    release_operator = (
        f'if [ -n "$({kubectl} get node {quoted} -o jsonpath={held_path})" ]; then {_patch(kubectl, node, release)}; fi'
    )
    return (
        "set -e; started=$(date -u +%Y-%m-%dT%H:%M:%SZ); "
        + take_hold_command(node, kubectl, holder, "repairing" if repairing else "draining")
        + ready_check
        + hold_operator
        + f"if [ {_unschedulable(kubectl, node)} != true ]; then "
        f'patch=$(printf {shlex.quote(mine)} "$started"); '
        f'else patch=$(printf {shlex.quote(theirs)} "$started"); fi; '
        f'{kubectl} patch node {quoted} --type=merge -p "$patch" >/dev/null; '
        + _drain_or_stop(kubectl, node)
        + ("" if repairing else f"{turn_state_command(node, kubectl, 'changing')}; ")
        + release_operator
    )


def rollout_done_command(node: str, kubectl: str, state: Mapping[str, str]) -> str:
    """A turn's last step, after its gate: one patch records the state rolled to, ends the turn and, only where
    the wave cordoned the node, uncordons it. One patch, so no interruption leaves a node uncordoned with its
    turn unrecorded, or cordoned with no mark saying whose."""
    record = json.dumps(dict(state), sort_keys=True, separators=(",", ":"))
    annotations: dict[str, str | None] = {
        ROLLOUT_ANNOTATION: record,
        WAVE_TURN_ANNOTATION: None,
        WAVE_STOPPED_ANNOTATION: None,
        # The operator removes its mark when it finishes an upgrade; a turn with no driver change ends it here.
        DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: None,
    }
    # The turn's end: its visible state done (kept until the next turn), which releases the hold.
    done_labels = {TURN_STATE_LABEL: "done"}
    serving = {
        "metadata": {"labels": done_labels, "annotations": {**annotations, WAVE_CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }
    path = shlex.quote("{.metadata.annotations." + WAVE_CORDON_ANNOTATION.replace(".", "\\.") + "}")
    quoted = shlex.quote(node)
    return (
        f'set -e; if [ -n "$({kubectl} get node {quoted} -o jsonpath={path})" ]; then '
        f"{_patch(kubectl, node, serving)}; echo {shlex.quote(f'{node}: rolled out, serving')}; "
        f"else {_patch(kubectl, node, {'metadata': {'labels': done_labels, 'annotations': annotations}})}; "
        f"if [ {_unschedulable(kubectl, node)} = true ]; then "
        f"echo {shlex.quote(f'{node}: rolled out; cordoned by someone else before the wave, left cordoned')}; "
        f"else echo {shlex.quote(f'{node}: rolled out, serving')}; fi; fi"
    )


def device_plugin_restart_command(node: str, kubectl: str, namespace: str) -> str:
    """The device plugin and GPU Feature Discovery each read the profile only at start: their config-managers
    react to a changed node label only (k8s-device-plugin v0.20.0 cmd/config-manager/main.go:273-280; NVIDIA
    gpu-sharing.rst: "The Operator does not monitor the time-slicing config maps"). A profile edited in place
    reaches the node only when both pods are recreated; restarting the plugin alone left GFD's labels
    (`nvidia.com/gpu.replicas`, the `-SHARED` product) on the old profile (FIELD-REVIEW-4 WRONG-5)."""
    selector = f"{OPERAND_APP_LABEL} in ({DEVICE_PLUGIN_APP},{GPU_FEATURE_DISCOVERY_APP})"
    return (
        f"{kubectl} -n {shlex.quote(namespace)} delete pod -l {shlex.quote(selector)} "
        f"--field-selector spec.nodeName={shlex.quote(node)} --wait=true --timeout=5m"
    )


def rke2_upgrade_command(
    version: str, env: Mapping[str, str] | None = None, installer: Rke2InstallerConfig | None = None
) -> str:
    """Runs on the VM over SSH: the official installer at the pinned release, as the first-boot join does
    (INSTALL_RKE2_VERSION, https://docs.rke2.io/upgrades/manual_upgrade), then the agent restarted on it.
    `env`: the proxy's variables (cloud_init.proxy_environment), for curl and the installer's own downloads;
    passed through `sudo env`, since sudo's env_reset drops the caller's."""
    pinned = shlex.quote(version)
    script = installer.script if installer is not None else RKE2_INSTALL_URL
    artifacts = installer.artifacts if installer is not None else None
    mirror = f"INSTALL_RKE2_ARTIFACT_URL={shlex.quote(artifacts)} " if artifacts else ""
    assigned = "".join(f"{name}={shlex.quote(value)} " for name, value in (env or {}).items())
    # Downloaded first, not piped: in a pipe `set -e` only sees the shell's exit, never curl's (as cloud_init.py).
    return (
        "set -e; "
        f"{assigned}curl -sfL {shlex.quote(script)} -o /tmp/install-rke2.sh; "
        f"sudo {'env ' + assigned if assigned else ''}{mirror}INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION={pinned} "
        "sh /tmp/install-rke2.sh; "
        "sudo systemctl restart rke2-agent; "
        f"echo {shlex.quote(f'rke2-agent restarted on {version}')}"
    )


def node_cleanup_command(node: str, kubectl: str) -> str:
    """A removed domain's Node object outlives its VM (nothing deregisters it): deleted after the VM."""
    return f"{kubectl} delete node {shlex.quote(node)} --ignore-not-found --wait=false"


def retire_drain_command(node: str, kubectl: str) -> str:
    """A removed domain's node is drained before its VM stops (a VM's delete stops it first): its GPU pods leave
    with their PodDisruptionBudgets respected instead of dying with the VM. Nothing to drain if it never joined."""
    quoted = shlex.quote(node)
    return f"if {kubectl} get node {quoted} >/dev/null 2>&1; then {_drain(kubectl, node)}; fi"
