"""The layers only import downwards, four floors: knowledge (and refdata) <- config and node <- components <- the
program and its tools (__main__, offline, day2, benchmarks). tests stand on all of them. node/ (one way to touch a
node) stands beside config/ on knowledge/ alone: it is packed into every payload that acts on a node.

A config model that imports a builder drags Pulumi and every provider SDK into validation, and a builder that
the other component imports couples the two halves; both used to happen. This walks every import statement
of the project's own code (not only what happens to be imported at run time) and names each bad edge.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("knowledge", "node", "config", "components", "offline", "day2", "benchmarks", "refdata", "tests")
# What each package (or sub-package) may import from the project, besides itself. Every top-level package but tests
# has an entry (test_every_top_level_package_has_its_floor).
ALLOWED: dict[str, set[str]] = {
    "knowledge": set(),
    # The upstream reference data's pins and fetcher: facts about the outside world, like knowledge/.
    "refdata": set(),
    "config": {"knowledge"},
    # One way to touch a node: the Node's vocabulary, the Kubernetes and Proxmox clients, the turn's transitions.
    # Standard library and knowledge/ only, below both components/ and day2/ (it is packed into their payloads).
    "node": {"knowledge"},
    "components.shared": {"config", "knowledge", "node"},
    # A domain's rollout state records the digest of the driver DaemonSet's template, computed from the platform's
    # own release values (one function: the two can never differ; FIELD-REVIEW-6 WRONG-1).
    "components.gpu_failure_domain": {
        "components.shared",
        "components.gpu_platform.driver_template",
        "config",
        "knowledge",
        "node",
    },
    "components.gpu_platform": {"components.shared", "config", "knowledge", "node"},
    "components": {"config", "knowledge", "node"},
    # The unattended repair's credential names each card's mapping as the domain's plan does, and registers its
    # Kubernetes objects as the platform's are.
    "components.unattended": {"components.shared", "components.gpu_failure_domain", "config", "knowledge", "node"},
    # The notebook reclaim policy's objects are registered as the platform's are.
    "components.reclaim": {"components.shared", "config", "knowledge"},
    # The day-2 command runs where only a kubeconfig is: it reads a stack file through config/, never the offline
    # preview, and none of it loads a Pulumi SDK (test_the_day2_command_on_a_dump_never_loads_pulumi).
    # Its --stack is validated by the one validation every entry point makes (components/stack_check.py).
    "day2": {
        "config",
        "knowledge",
        "node",
        "components.shared",
        "components.gpu_platform",
        "components.gpu_failure_domain",
        "components.stack_check",
        # The breaker's ConfigMap name, that `gpu-pool repair --reset-breaker` closes.
        "components.unattended.objects",
        # What the reclaim policy writes on a Notebook and the metrics it exports: one list, read by the policy's
        # code (day2/reclaim/) and its alerts.
        "components.reclaim.names",
    },
    # The offline preview and make diff read a domain's plan through its one public module, and validate a stack
    # by the one validation.
    "offline": {
        "config",
        "knowledge",
        "components.gpu_failure_domain.plan",
        "components.stack_check",
        # What a lab with no route out must serve (make preview ARGS=--inventory).
        "components.air_gap",
        "components.rendered_plan",
        "components.unattended.credential",
        "components.unattended.rbac",
        "components.reclaim.api",
    },
    # The Pulumi program stands on the components and the config alone: what it ships to the cluster from day2/ (the
    # health check's code) is packed from source by components/shared/payload.py, never imported.
    "__main__": {"components", "config", "knowledge"},
    # The benchmarks measure the offline tools and fetch the upstream data the contract tests read.
    "benchmarks": {"components", "config", "knowledge", "node", "offline", "refdata"},
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES:
                yield node.lineno, name


def _layer(module: str) -> str | None:
    """The most specific entry of ALLOWED that the module belongs to."""
    matches = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def bad_edges(root: Path = ROOT) -> list[str]:
    edges: list[str] = []
    files = [root / "__main__.py", *(p for package in PACKAGES for p in sorted((root / package).rglob("*.py")))]
    for path in files:
        if not path.is_file():
            continue
        module = _module_name(path, root)
        layer = _layer(module)
        for line, imported in _project_imports(path):
            where = f"{path.relative_to(root)}:{line} imports {imported}"
            if not _within(module, "tests") and _within(imported, "tests"):
                edges.append(f"{where}: only tests may import tests")
                continue
            if layer is None or _within(imported, layer):
                continue
            if not any(_within(imported, allowed) for allowed in ALLOWED[layer]):
                edges.append(f"{where}: {layer} may import only {', '.join(sorted(ALLOWED[layer])) or 'nothing'}")
    return edges


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert bad_edges() == []


def test_every_top_level_package_has_its_floor() -> None:
    """A new top-level package (or the program) is walked and has its rule: none escapes the layer test."""
    on_disk = {path.parent.name for path in ROOT.glob("*/__init__.py")} | {"__main__"}

    assert on_disk <= set(PACKAGES) | {"__main__"}
    assert on_disk - {"tests"} == {layer for layer in ALLOWED if "." not in layer}


def _module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every project module (tests excluded) and the project modules it imports, anywhere in its body."""
    files = [
        root / "__main__.py",
        *(p for package in PACKAGES if package != "tests" for p in (root / package).rglob("*.py")),
    ]
    modules = {_module_name(path, root): path for path in files if path.is_file()}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, imported in _project_imports(path):
            parts = imported.split(".")
            # `from a.b import c` names a.b (or the module a.b.c, which the walk sees as a.b here: a package's
            # __init__ is a module of its own).
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts and ".".join(parts) != name:
                graph[name].add(".".join(parts))
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert import_cycles(_module_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_day2_command_on_a_dump_never_loads_pulumi() -> None:
    """`gpu-pool claims`, `doctor` and `repair` run where only a kubeconfig is: they must not need, or load, a Pulumi
    SDK (`repair` plans its turn with the domain's plan, which is plain data)."""
    program = (
        "import contextlib, io, sys\n"
        "from day2.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['claims', '--from', 'examples/day2/notebooks.json', '--now', '2026-05-04T10:00:00Z'])\n"
        "    main(['doctor', 'rke2-worker-dc2-gpu-a', '--from', 'examples/day2/broken-driver.json'])\n"
        "    main(['doctor', 'rke2-worker-dc1-gpu-a', '--from', 'examples/day2/notebooks.json', '--stack', 'prod'])\n"
        "    assert main(['repair', 'rke2-worker-dc2-gpu-a', '--stack', 'h200-lab', '--stack-dir', 'examples/day2', "
        "'--from', 'examples/day2/h200-lab.json', '--node-check', 'examples/day2/node-check-dc2-xid79.json']) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_kubernetes', 'offline')))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_no_module_under_config_imports_from_components() -> None:
    assert not [edge for edge in bad_edges() if edge.startswith("config/") and " components" in edge]


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("config/x.py", "from components.gpu_platform.operator_values import build_gpu_operator_values\n", "config"),
        ("knowledge/x.py", "import config.base\n", "knowledge"),
        ("components/gpu_failure_domain/x.py", "from components.gpu_platform import GpuPlatform\n", "gpu_failure"),
        ("components/shared/x.py", "from components.gpu_failure_domain.cloud_init import x\n", "shared"),
        ("offline/x.py", "from tests.conftest import x\n", "only tests"),
        ("day2/x.py", "from offline.runner import read_stack_file\n", "day2"),
        ("offline/x.py", "from components.gpu_failure_domain.rollout import x\n", "offline"),
        ("__main__.py", "from day2.bundle import node_check_zip\n", "__main__"),
        ("refdata/x.py", "from config.errors import ConfigError\n", "refdata"),
        ("node/x.py", "from config.stack import StackConfig\n", "node"),
        ("node/x.py", "from components.gpu_failure_domain.observed import ObservedNode\n", "node"),
        ("node/x.py", "from day2.repair.decide import decide\n", "node"),
        ("benchmarks/x.py", "from day2.cli import main\n", "benchmarks"),
    ],
)
def test_the_walk_catches_an_upward_or_sideways_edge(tmp_path: Path, path: str, source: str, expected: str) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    target = tmp_path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("def f():\n    " + source.replace("\n", "\n    ") + "\n", encoding="utf-8")
    (edge,) = bad_edges(tmp_path)
    assert path in edge and expected in edge
