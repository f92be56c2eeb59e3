"""The day-2 code that runs where the project is not installed, as one zip Python runs (a zipapp).

node-check runs on a GPU worker with python3 and the standard library alone; `gpu-pool repair` sends it there
over SSH as this zip (base64 in the command line: no copy step, nothing left behind). The in-cluster health
check (day2/doctor/health_check.py) runs doctor's cluster floors in a stock python image from a ConfigMap holding its
zip. The zips are byte-for-byte the same for the same sources (fixed times, sorted names), so the ConfigMap
changes only when the code does.
"""

from __future__ import annotations

import base64
import io
import shlex
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What node-check imports and reads, and nothing else: it runs on the node with the standard library alone.
NODE_CHECK_FILES = (
    "day2/__init__.py",
    "day2/command.py",
    "day2/node_check/__init__.py",
    "day2/node_check/__main__.py",
    "day2/node_check/command.py",
    "day2/node_check/facts.py",
    "day2/node_check/floors.py",
    "day2/node_check/nvml.py",
    "knowledge/__init__.py",
    "knowledge/data/nvidia_cards.json",
    "knowledge/gpu_cards.py",
    "knowledge/nvml.py",
    "knowledge/pci.py",
    "knowledge/xid.py",
)
NODE_CHECK_MAIN = "import sys\n\nfrom day2.node_check.command import main\n\nsys.exit(main())\n"
# What doctor's floors and the in-cluster health check import (a test runs the zip with every site package
# hidden), and PyYAML's pure-Python package for the sharing profiles (its C extension is left out: PyYAML falls
# back to Python when it is missing). The zip carries PyYAML's licence.
HEALTH_CHECK_FILES = (
    "components/shared/__init__.py",
    "components/shared/health_condition.py",
    "components/shared/node_marking.py",
    "day2/__init__.py",
    "day2/doctor/__init__.py",
    "day2/doctor/floors_operands.py",
    "day2/doctor/floors_pool.py",
    "day2/doctor/floors_types.py",
    "day2/doctor/health_check.py",
    "day2/doctor/node_report.py",
    "day2/doctor/operands.py",
    "day2/doctor/sharing.py",
    "day2/doctor/traps.py",
    "day2/doctor/walk.py",
    "day2/errors.py",
    "day2/node_check/__init__.py",
    "day2/node_check/facts.py",
    "day2/node_check/floors.py",
    "day2/objects.py",
    "day2/pool.py",
    "knowledge/__init__.py",
    "knowledge/data/nvidia_cards.json",
    "knowledge/gpu_cards.py",
    "knowledge/gpu_operator.py",
    "knowledge/kubernetes.py",
    "knowledge/nvml.py",
    "knowledge/pci.py",
    "knowledge/xid.py",
)
HEALTH_CHECK_MAIN = "import sys\n\nfrom day2.doctor.health_check import main\n\nsys.exit(main())\n"
# The check needs two constant modules of components/shared, not the package's own __init__, which registers the
# rendered-plan pass for programs that build a plan (and so imports every builder and the config models).
COMPONENTS_INIT = b'"""gpu-pool\'s components, as far as the health check needs them: components/shared\'s names."""\n'
# A zip entry's time: the earliest a zip can hold, so the bytes depend on the contents alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)
# One argument of a command line is at most 128 KiB on Linux (MAX_ARG_STRLEN): the remote shell gets the whole
# command as one, so the encoded zip must leave room for the rest.
MAX_COMMAND_BYTES = 100_000


def zipapp(files: Sequence[tuple[str, bytes]], main: str) -> bytes:
    """A zip of (path, content) with `__main__.py` = main, which `python3 app.pyz` runs."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, content in sorted([*files, ("__main__.py", main.encode())]):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def project_files(paths: Sequence[str], root: Path = ROOT) -> list[tuple[str, bytes]]:
    return [(path, (root / path).read_bytes()) for path in paths]


def node_check_zip() -> bytes:
    return zipapp(project_files(NODE_CHECK_FILES), NODE_CHECK_MAIN)


def pyyaml_files() -> list[tuple[str, bytes]]:
    """The installed PyYAML's Python modules and its licence (the project locks its version: uv.lock)."""
    import importlib.metadata

    import yaml

    package = Path(yaml.__file__).parent
    files = [(f"yaml/{path.name}", path.read_bytes()) for path in sorted(package.glob("*.py"))]
    licence = next((f for f in importlib.metadata.files("PyYAML") or [] if f.name == "LICENSE"), None)
    if licence is not None:
        files.append(("yaml/LICENSE", Path(str(licence.locate())).read_bytes()))
    return files


def health_check_zip() -> bytes:
    """The in-cluster health check (day2/doctor/health_check.py) and what it imports, for the stack's ConfigMap."""
    files = [*project_files(HEALTH_CHECK_FILES), ("components/__init__.py", COMPONENTS_INIT), *pyyaml_files()]
    return zipapp(files, HEALTH_CHECK_MAIN)


def node_check_command(flags: Sequence[str], *, strict: bool) -> str:
    """A shell command for the node (run over SSH) that runs node-check from the zip with `flags`.

    As root where sudo needs no password (the kernel log is root's where kernel.dmesg_restrict is 1, Ubuntu's
    default), else as the login user (then the health floor reads no Xid and says so). `strict`: node-check's
    table and its exit code (1 on a broken floor), as a repair's check after the power cycle runs it; otherwise
    its JSON report is the answer and only an error (exit 2) fails."""
    encoded = base64.b64encode(node_check_zip()).decode()
    run = f'python3 "$f" {" ".join(shlex.quote(flag) for flag in flags)}' + ("" if strict else " -o json")
    ending = "" if strict else '; rc=$?; [ "$rc" -le 1 ] || exit "$rc"'
    command = (
        "f=$(mktemp /tmp/gpu-pool-node-check.XXXXXX) || exit 2; trap 'rm -f \"$f\"' EXIT; "
        f'printf %s {encoded} | base64 -d > "$f" || exit 2; '
        f"if sudo -n true 2>/dev/null; then sudo -n {run}; else {run}; fi{ending}"
    )
    if len(command) > MAX_COMMAND_BYTES:
        raise ValueError(f"node-check's zip makes a {len(command)}-byte command, over {MAX_COMMAND_BYTES}")
    return command
