"""Project code packed as one zip that Python runs (a zipapp), for where the project is not installed: node-check
on a GPU worker (sent over SSH by `gpu-pool repair`), the node-steps script pulumi-command runs (in its command
text), the in-cluster health check and watcher (ConfigMaps the stack writes). Standard library only.

What goes in is found, not listed: the import closure of the entry module, read from the source (nothing is
imported here). Followed: every project import a module runs when it is loaded. Not followed: an import inside a
function or under `if TYPE_CHECKING:` - the payload's code keeps those for where the project is installed (a
default that reaches for the config models, `--stack` on the node) and says so where it makes them; a test runs
each zip with every site package hidden. A package's `__init__.py` comes with its modules; one that runs code when
imported is packed as its docstring alone, and none of its imports, since the payload imports modules, never
what a package's `__init__` sets up. A data file a packed module names (`"data" / "nvidia_cards.json"` beside
it) comes with it.

The zips are byte-for-byte the same for the same sources (fixed times, sorted names), so the ConfigMap changes only
when the code does.
"""

from __future__ import annotations

import ast
import io
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# The project's own top-level packages: an import of anything else is the standard library or a site package.
PROJECT_PACKAGES = ("knowledge", "node", "config", "components", "day2", "offline", "benchmarks", "refdata")
# A zip entry's time: the earliest a zip can hold, so the bytes depend on the contents alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _path_of(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements Python runs when it loads the module: the top level, into if/try/with blocks, never into a
    function or class body, nor an `if TYPE_CHECKING:` block."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If):
            if not _is_type_checking(statement.test):
                yield from _load_time_statements(statement.body)
            yield from _load_time_statements(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                yield from _load_time_statements(block)
            for handler in statement.handlers:
                yield from _load_time_statements(handler.body)
        elif isinstance(statement, ast.With):
            yield from _load_time_statements(statement.body)


def _imported(module: str, tree: ast.Module, is_package: bool) -> Iterator[str]:
    """The project modules a module imports when loaded (`from a import b`: a.b when it is a module, else a)."""
    for statement in _load_time_statements(tree.body):
        if isinstance(statement, ast.Import):
            yield from (alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            if statement.level:
                parts = module.split(".")
                keep = len(parts) - statement.level + (1 if is_package else 0)
                base = ".".join([*parts[:keep], *([statement.module] if statement.module else [])])
            else:
                base = statement.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in statement.names)


def _data_files(path: Path, tree: ast.Module, root: Path) -> Iterator[Path]:
    """Files beside the module (or in its data/ folder) that it names in a string."""
    names = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    for name in sorted(names):
        if "." not in name or len(name) > 100 or any(char in name for char in "/ \n"):
            continue
        for candidate in (path.parent / name, path.parent / "data" / name):
            if candidate.is_file() and candidate.suffix != ".py" and candidate.is_relative_to(root):
                yield candidate


def _runs_code(tree: ast.Module) -> bool:
    """Whether an `__init__.py` does more than document its package."""
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body
    return any(not (isinstance(s, ast.ImportFrom) and s.module == "__future__") for s in body)


def module_closure(entries: Sequence[str], root: Path = ROOT) -> dict[str, bytes]:
    """Path in the zip -> content: the entry modules, what they import when loaded, their packages' `__init__.py`
    and the data files they name."""
    files: dict[str, bytes] = {}
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in PROJECT_PACKAGES:
            continue
        seen.add(module)
        path = _path_of(module, root)
        if path is None:
            continue  # `from package import name` where name is not a module
        tree = ast.parse(path.read_bytes(), filename=str(path))
        todo += [".".join(module.split(".")[:depth]) for depth in range(1, module.count(".") + 1)]
        if path.name == "__init__.py" and _runs_code(tree):
            # Its docstring alone, and none of what it imports (see the module's docstring).
            files[path.relative_to(root).as_posix()] = f'"""{ast.get_docstring(tree, clean=False) or ""}"""\n'.encode()
            continue
        files[path.relative_to(root).as_posix()] = path.read_bytes()
        todo += _imported(module, tree, path.name == "__init__.py")
        for data in _data_files(path, tree, root):
            files[data.relative_to(root).as_posix()] = data.read_bytes()
    return files


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


def run_main(module: str) -> str:
    """The zip's `__main__.py`: runs `module.main()` and exits with what it returns."""
    return f"import sys\n\nfrom {module} import main\n\nsys.exit(main())\n"


def pack(entry: str, *, extra: Sequence[tuple[str, bytes]] = (), also: Sequence[str] = (), root: Path = ROOT) -> bytes:
    """The zipapp that runs `entry.main()`: its import closure (and that of `also`), plus `extra` files."""
    files = module_closure([entry, *also], root)
    return zipapp([*files.items(), *extra], run_main(entry))


def pyyaml_files() -> list[tuple[str, bytes]]:
    """The installed PyYAML's Python modules and its licence (the project locks its version: uv.lock), for a payload
    that reads YAML: its C extension is left out (PyYAML falls back to Python when it is missing)."""
    import importlib.metadata

    import yaml

    package = Path(yaml.__file__).parent
    files = [(f"yaml/{path.name}", path.read_bytes()) for path in sorted(package.glob("*.py"))]
    licence = next((f for f in importlib.metadata.files("PyYAML") or [] if f.name == "LICENSE"), None)
    if licence is not None:
        files.append(("yaml/LICENSE", Path(str(licence.locate())).read_bytes()))
    return files
