"""NVIDIA's own node software on the program's time-slicing profiles: what is recorded, and what it printed.

The program's profile documents are judged by the programs that read them on a node, not by a reading of their
source written here. Two recordings, kept under tests/fixtures/deviceplugin/ (CI has no GPU, and `make test` no Go):
- `profile-config.json`: the device plugin's own config loader (e2e/deviceplugin/profile-config, built against
  k8s-device-plugin's `api/config/v1`) on every recorded document; the e2e tier runs it again and must get the
  same (tests/e2e/test_device_plugin_config.py);
- `h200/`: on a real H200, GPU Feature Discovery's labels and the device plugin's advertised devices and Allocate
  answer under each document (e2e/deviceplugin/gpu-run.sh; docs/verification.md has the commands).

The recorded documents are every profile the program can render (replicas 1 to the most SharingProfile allows:
a profile is its replica count, nothing else) and a few deliberately wrong shapes, which the checks below must
refuse: the proof that those checks can fail. The loader also reads a few hand-edited edge cases (PROBES), which
doctor's own reading of a profile (day2/doctor/sharing.py) must agree with.

    python -m tests.plugin_recording profiles DIR       the documents (NAME.yaml) and the GPU run's order.txt
    python -m tests.plugin_recording record-config BIN  profile-config.json, from the profile-config binary
    python -m tests.plugin_recording import-h200 RAW    tests/fixtures/deviceplugin/h200/ from gpu-run.sh's raw.tar.gz
                                                        (--profiles DIR: the documents it ran on, as profiles.json)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tarfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import annotated_types
import yaml

from components.gpu_platform.time_slicing import render_profile
from components.stack_check import validate_stack
from config.sharing import SharingProfile
from config.stack import StackConfig
from knowledge.gpu_operator import GPU_RESOURCE
from offline.runner import ROOT_DIR, read_stack_file

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures" / "deviceplugin"
PROFILE_CONFIG_FIXTURE: Final = FIXTURES / "profile-config.json"
H200: Final = FIXTURES / "h200"
PLUGIN_MODULE: Final = "github.com/NVIDIA/k8s-device-plugin"
PLUGIN_GO_MOD: Final = Path(__file__).resolve().parent.parent / "e2e" / "deviceplugin" / "go.mod"

# The environment a GPU node's plugin runs under: cdi = the GPU Operator with cdi.enabled (the program's
# ClusterPolicy); envvar = the DaemonSet's defaults without CDI (device specs passed, NVIDIA_VISIBLE_DEVICES).
CDI: Final = "cdi"
ENVVAR: Final = "envvar"


def max_replicas() -> int:
    """The largest `replicas` a SharingProfile accepts (its own `le` bound, not a copy of it)."""
    bounds = [m.le for m in SharingProfile.model_fields["replicas"].metadata if isinstance(m, annotated_types.Le)]
    if len(bounds) != 1 or not isinstance(bounds[0], int):
        raise ValueError(f"SharingProfile.replicas has no single integer upper bound: {bounds}")
    return bounds[0]


def pinned_plugin() -> str:
    """`github.com/NVIDIA/k8s-device-plugin vX.Y.Z`, as e2e/deviceplugin/go.mod pins it."""
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(PLUGIN_MODULE)} (v\S+)", PLUGIN_GO_MOD.read_text(), re.M)
    if found is None:
        raise ValueError(f"{PLUGIN_GO_MOD} does not require {PLUGIN_MODULE}")
    return f"{PLUGIN_MODULE} {found.group(1)}"


def shape(profile: SharingProfile) -> str:
    """The recorded name of the document the program renders for this profile (its name in a stack is free)."""
    return f"replicas-{profile.replicas}"


def shipped_stacks() -> list[str]:
    """The stacks the project ships (Pulumi.<name>.yaml beside the program)."""
    return sorted(p.name.split(".")[1] for p in ROOT_DIR.glob("Pulumi.*.yaml"))


def valid_stack_files() -> list[Path]:
    """Every stack file shipped that a preview accepts: beside the program and under examples/ (not
    examples/mistakes, which holds mistakes on purpose)."""
    found = [*ROOT_DIR.glob("Pulumi.*.yaml"), *ROOT_DIR.glob("examples/*/Pulumi.*.yaml")]
    return sorted(p for p in found if "mistakes" not in p.relative_to(ROOT_DIR).parts)


def stack_config(stack: str, root: Path = ROOT_DIR) -> StackConfig:
    """A shipped stack's validated config (`root`: the folder of its stack file)."""
    raw = read_stack_file(stack, root)
    return validate_stack({k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("gpu-pool:")})


def program_documents() -> dict[str, str]:
    """Every profile document the program can render, by shape name."""
    return {shape(p): render_profile(p) for p in (SharingProfile(replicas=n) for n in range(1, max_replicas() + 1))}


def _wrong(change: str) -> str:
    document: dict[str, Any] = yaml.safe_load(render_profile(SharingProfile(replicas=4)))
    time_slicing = document["sharing"]["timeSlicing"]
    if change == "rename-under-flags":
        # k8s-device-plugin#1433's shape: the two sharing flags where the command-line flags live.
        document["flags"]["renameByDefault"] = time_slicing.pop("renameByDefault", False)
        document["flags"]["failRequestsGreaterThanOne"] = time_slicing.pop("failRequestsGreaterThanOne", False)
    elif change == "sharing-under-flags":
        document["flags"]["timeSlicing"] = document.pop("sharing")["timeSlicing"]
    elif change == "renamed":
        time_slicing["renameByDefault"] = True
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


# Shapes the program must never render; each one is read differently from what the program means by replicas 4.
WRONG_SHAPES: Final = ("rename-under-flags", "sharing-under-flags", "renamed")


def wrong_documents() -> dict[str, str]:
    return {f"wrong-{change}": _wrong(change) for change in WRONG_SHAPES}


def recorded_documents() -> dict[str, str]:
    """What the H200 ran: every program shape and the wrong ones."""
    return program_documents() | wrong_documents()


_SHARED = "sharing:\n  {block}:\n    resources:\n    - name: {name}\n      replicas: {replicas}\n"
# Documents the program never renders, for the plugin's loader only: the edges of the day-2 tool's own reading of a
# profile (day2/doctor/sharing.py), which a cluster's ConfigMap edited by hand can hold.
PROBES: Final = {
    "probe-no-version": _SHARED.format(block="timeSlicing", name=GPU_RESOURCE, replicas=4),
    "probe-version-v2": "version: v2\n" + _SHARED.format(block="timeSlicing", name=GPU_RESOURCE, replicas=4),
    "probe-one-replica-entry": "version: v1\n" + _SHARED.format(block="timeSlicing", name=GPU_RESOURCE, replicas=1),
    "probe-no-resources": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: false\n",
    "probe-mps": "version: v1\n" + _SHARED.format(block="mps", name=GPU_RESOURCE, replicas=4),
    "probe-other-resource": "version: v1\n"
    + _SHARED.format(block="timeSlicing", name="nvidia.com/mig-1g.18gb", replicas=2),
    "probe-explicit-rename": "version: v1\n"
    + _SHARED.format(block="timeSlicing", name=GPU_RESOURCE, replicas=3)
    + "      rename: gpu.lab\n",
    "probe-string-replicas": "version: v1\n" + _SHARED.format(block="timeSlicing", name=GPU_RESOURCE, replicas='"4"'),
}


def loader_documents() -> dict[str, str]:
    """What the plugin's loader reads: everything the H200 ran, and the probes."""
    return recorded_documents() | PROBES


def run_order() -> list[tuple[str, str]]:
    """The GPU run's (mode, shape) pairs, most telling first (a deadline cuts the tail): the shipped stacks' shapes,
    the same without CDI, the wrong shapes, then every other replica count."""
    first = ["replicas-1", "replicas-4", "replicas-2"]
    rest = [name for name in program_documents() if name not in first]
    return (
        [(CDI, name) for name in first]
        + [(ENVVAR, "replicas-1"), (ENVVAR, "replicas-4")]
        + [(CDI, name) for name in wrong_documents()]
        + [(CDI, name) for name in rest]
    )


# --- what the program means, against what the plugin read ---------------------------------------------------------


def intended_reading(replicas: int) -> dict[str, Any]:
    """What the device plugin must read from the program's document for `replicas`: nothing ignored, the plain
    nvidia.com/gpu name kept (renameByDefault false), replicas on every card, requests of several slots allowed."""
    shared = replicas > 1
    return {
        "loadError": None,
        "ignoredByPlugin": None,
        "sharingStrategy": "time-slicing" if shared else "none",
        "renameByDefault": False,
        "failRequestsGreaterThanOne": False,
        "resources": [{"name": GPU_RESOURCE, "rename": "", "replicas": replicas, "devices": "all"}] if shared else [],
        "migStrategy": "none",
    }


def reading_differences(reading: Mapping[str, Any], replicas: int) -> list[str]:
    """Each way the plugin's reading differs from the program's intent, as a sentence; empty when none."""
    intended = intended_reading(replicas)
    differences = []
    for key, meant in intended.items():
        read = reading.get(key)
        if read == meant:
            continue
        if key == "ignoredByPlugin":
            differences.append(f"the plugin silently ignores part of the document ({read})")
        elif key == "loadError":
            differences.append(f"the plugin refuses the document: {read}")
        else:
            differences.append(f"{key}: the plugin reads {json.dumps(read)}, the program means {json.dumps(meant)}")
    return differences


# --- the recordings ------------------------------------------------------------------------------------------------


@cache
def recorded_config() -> dict[str, Any]:
    """profile-config.json: {"plugin": "<module> <version>", "profiles": {shape: {"document": ..., "reading": ...}}}."""
    recorded: dict[str, Any] = json.loads(PROFILE_CONFIG_FIXTURE.read_text())
    return recorded


def gfd_labels(name: str, version_dir: Path = H200) -> dict[str, str]:
    """The labels GPU Feature Discovery wrote on the H200 under document `name` (its output file: key=value lines)."""
    text = (version_dir / "gfd" / f"{name}.labels").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def kubelet_report(name: str, mode: str = CDI, version_dir: Path = H200) -> dict[str, Any]:
    """What mini-kubelet saw when the plugin registered under document `name`: devices and Allocate answers."""
    report: dict[str, Any] = json.loads((version_dir / "kubelet" / f"{mode}-{name}.json").read_text())
    return report


def card(version_dir: Path = H200) -> dict[str, str]:
    """The recorded machine's card, from its `nvidia-smi --query-gpu=...` CSV line in machine.txt."""
    lines = (version_dir / "machine.txt").read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("name, driver_version"))
    keys = [key.split(" ")[0] for key in lines[header].split(", ")]
    return dict(zip(keys, lines[header + 1].split(", "), strict=True))


def cdi_spec(version_dir: Path = H200) -> dict[str, Any]:
    """The CDI spec the device plugin wrote (cdi-cri mode) for its resource."""
    spec: dict[str, Any] = json.loads((version_dir / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json").read_text())
    return spec


def h200_documents() -> dict[str, str]:
    """The profile documents the H200 run was given (gpu-run.sh's PROFILES_DIR, as `profiles` wrote it)."""
    documents: dict[str, str] = json.loads((H200 / "profiles.json").read_text())
    return documents


def recorded_run_names(version_dir: Path = H200) -> list[str]:
    return sorted(p.stem for p in (version_dir / "gfd").glob("*.labels"))


# --- commands ------------------------------------------------------------------------------------------------------


def write_profiles(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, document in recorded_documents().items():
        (directory / f"{name}.yaml").write_text(document)
    (directory / "order.txt").write_text("".join(f"{mode} {name}\n" for mode, name in run_order()))


def record_config(binary: Path) -> dict[str, Any]:
    """Run profile-config on every recorded document; what it prints, beside the documents it read."""
    documents = loader_documents()
    done = subprocess.run([str(binary)], input=json.dumps(documents), capture_output=True, text=True, check=True)
    readings = json.loads(done.stdout)
    profiles = {name: {"document": documents[name], "reading": readings[name]} for name in sorted(documents)}
    return {"plugin": pinned_plugin(), "profiles": profiles}


# What a GPU run's raw.tar.gz holds that becomes a fixture (the rest: logs of every run, kept out of the tree).
KEPT_PLUGIN_LOGS: Final = (f"{CDI}-replicas-4", f"{ENVVAR}-replicas-4", f"{CDI}-wrong-renamed")


def import_h200(raw: Path, target: Path) -> None:
    """gpu-run.sh's raw.tar.gz -> machine.txt, order.txt, gfd/NAME.labels (lines sorted: GFD writes them in map
    order), kubelet/MODE-NAME.json, the CDI spec, a few plugin logs, and exits.json (every program's exit code)."""
    target.mkdir(parents=True, exist_ok=True)
    exits: dict[str, dict[str, int]] = {}
    with tarfile.open(raw) as archive:
        for member in archive.getmembers():
            path = Path(member.name)
            extracted = archive.extractfile(member) if member.isfile() else None
            if extracted is None:
                continue
            data = extracted.read()
            kind = path.parent.name
            if path.suffix == ".rc":
                exits.setdefault(kind, {})[path.stem] = int(data.decode().strip())
                continue
            if path.suffix == ".labels":
                data = "".join(sorted(data.decode().splitlines(keepends=True))).encode()
            keep = (
                path.name in ("machine.txt", "order.txt", "skipped.txt")
                or (kind == "gfd" and path.suffix == ".labels")
                or (kind == "kubelet" and path.suffix == ".json")
                or kind == "cdi"
                or (kind == "plugin" and path.stem in KEPT_PLUGIN_LOGS)
            )
            if keep:
                out = target / path.relative_to(path.anchor or ".")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
    ordered = {kind: dict(sorted(runs.items())) for kind, runs in sorted(exits.items())}
    (target / "exits.json").write_text(json.dumps(ordered, indent=2) + "\n")


def exits(version_dir: Path = H200) -> dict[str, dict[str, int]]:
    """Exit code of each program per run: gfd per shape, kubelet (mini-kubelet) and plugin per MODE-NAME."""
    recorded: dict[str, dict[str, int]] = json.loads((version_dir / "exits.json").read_text())
    return recorded


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.plugin_recording")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("profiles").add_argument("directory", type=Path)
    sub.add_parser("record-config").add_argument("binary", type=Path)
    imported = sub.add_parser("import-h200")
    imported.add_argument("raw", type=Path, help="gpu-run.sh's raw.tar.gz")
    imported.add_argument("--target", type=Path, default=H200)
    imported.add_argument("--profiles", type=Path, help="the PROFILES_DIR the run was given")
    args = parser.parse_args()
    if args.command == "profiles":
        write_profiles(args.directory)
    elif args.command == "record-config":
        recorded = record_config(args.binary)
        PROFILE_CONFIG_FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        PROFILE_CONFIG_FIXTURE.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    else:
        import_h200(args.raw, args.target)
        if args.profiles:
            documents = {p.stem: p.read_text() for p in sorted(args.profiles.glob("*.yaml"))}
            (args.target / "profiles.json").write_text(json.dumps(documents, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
