"""`python -m benchmarks.node_code [--rev REV]`: how much code runs against a node, and how many clients it uses.

Issue 48 asks for these figures before and after `node/`, counted by one rule at both revisions; this is that rule,
read from the tree (`--rev`: a commit, through `git show`, so the same script counts an older tree):

- **A client** is a module that opens a transport to the Kubernetes API or to Proxmox itself: it runs `kubectl`
  (a subprocess whose code names kubectl), calls `urllib.request.urlopen` against the Kubernetes API (its code
  sends a `Bearer` token or reads a ServiceAccount) or Proxmox's (`api2/json`, `PVEAPIToken`), or builds the
  official `kubernetes` client (`load_kube_config`). Counted per module: a client with two transports in one
  module (node/kube.py) is one client; the definitions found are listed.
- **Code that runs against a node** is every module of components/, day2/ and node/ (tests aside) that holds a
  client, uses one (it imports from a module that holds one), or builds a command
  from the stack's kubectl (its code interpolates it: `{kubectl} patch node ...`), or names the Node vocabulary
  a turn writes (the turn-state label, the holder, the cordon mark, the repair record, the operator's skip label
  and initial-state mark: by their constants' names, or node/'s `TurnState`). Its lines of code: lines with a token
  that is not a comment, a docstring or blank.

Prints a table and, with `--json`, one JSON object. No threshold is checked: the figures are for the closing note.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "day2", "node")
# A command built from the stack's kubectl (`f"{kubectl} patch node ..."`), not a hint that names kubectl.
KUBECTL = re.compile(r"\{[\w.]*kubectl\}")
# The Node's vocabulary a turn writes, by the names the tree gives it (observed.py before node/, node/ after).
VOCABULARY = re.compile(
    r"\b(TURN_STATE_LABEL|TURN_HOLDER_ANNOTATION|WAVE_CORDON_ANNOTATION|WAVE_TURN_ANNOTATION|REPAIRS_ANNOTATION"
    r"|WAVE_STOPPED_ANNOTATION|WAVE_SKIP_ANNOTATION|DRIVER_UPGRADE_SKIP_LABEL|DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION"
    r"|TurnState|Vocabulary)\b"
)
TRANSPORT = re.compile(r"urlopen \(|subprocess \. (run|Popen) \(|load_kube_config \(")
PROXMOX = re.compile(r"api2/json|PVEAPIToken")
KUBERNETES = re.compile(r"Bearer|serviceaccount|load_kube_config|\bkubectl\b", re.IGNORECASE)


@dataclass(frozen=True)
class Module:
    path: str
    code_lines: int
    # Top-level classes and functions that open a transport, by kind ("kubernetes", "proxmox").
    clients: Mapping[str, tuple[str, ...]]
    names: frozenset[str]
    imports: Mapping[str, str]
    text: str


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_of(source: str) -> tuple[int, str]:
    """(lines of code, the code's text without comments and docstrings)."""
    tree = ast.parse(source)
    docstrings = _docstring_lines(tree)
    lines: set[int] = set()
    kept: list[str] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in skip or token.type == tokenize.ENDMARKER:
            continue
        if token.start[0] in docstrings and token.type == tokenize.STRING:
            continue
        lines.update(range(token.start[0], token.end[0] + 1))
        kept.append(token.string)
    return len(lines - docstrings), " ".join(kept)


def _segments(source: str, tree: ast.Module) -> Iterator[tuple[str, str]]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, ast.get_source_segment(source, node) or ""


def read_module(path: str, source: str) -> Module:
    tree = ast.parse(source)
    lines, code = code_of(source)
    clients: dict[str, list[str]] = {}
    for name, segment in _segments(source, tree):
        _, text = code_of(segment) if segment.strip() else (0, "")
        if not TRANSPORT.search(text):
            continue
        if PROXMOX.search(text):
            clients.setdefault("proxmox", []).append(name)
        elif KUBERNETES.search(text) and not re.search(r"prometheus", text, re.IGNORECASE):
            clients.setdefault("kubernetes", []).append(name)
    names = frozenset(n for n, _ in _segments(source, tree))
    imports: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = node.module
    return Module(path, lines, {k: tuple(v) for k, v in clients.items()}, names, imports, code)


def tree_files(rev: str | None) -> dict[str, str]:
    """Path -> source of every .py file under PACKAGES, from the work tree or from a commit."""
    if rev is None:
        return {
            p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for package in PACKAGES
            for p in sorted((ROOT / package).rglob("*.py"))
        }
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "--", *PACKAGES],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return {
        path: subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        for path in listed
        if path.endswith(".py")
    }


def module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def count(files: Mapping[str, str]) -> dict[str, object]:
    modules = {module_name(path): read_module(path, source) for path, source in files.items()}
    # The modules that hold a client: importing anything from one is using it (its client, or what it builds on it).
    holders = {name for name, m in modules.items() if m.clients}
    against: list[Module] = []
    for m in modules.values():
        uses = any(owner in holders for owner in m.imports.values())
        if m.clients or uses or KUBECTL.search(m.text) or VOCABULARY.search(m.text):
            against.append(m)
    kube = {m.path: list(m.clients["kubernetes"]) for m in modules.values() if "kubernetes" in m.clients}
    pve = {m.path: list(m.clients["proxmox"]) for m in modules.values() if "proxmox" in m.clients}
    return {
        "lines": sum(m.code_lines for m in against),
        "files": len(against),
        "packages": sorted({m.path.split("/")[0] + "/" + m.path.split("/")[1] for m in against if "/" in m.path}),
        "byFile": {m.path: m.code_lines for m in sorted(against, key=lambda m: m.path)},
        "kubernetesClients": kube,
        "proxmoxClients": pve,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", help="count a commit's tree instead of the work tree")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = count(tree_files(args.rev))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    where = args.rev or "the work tree"
    kube, pve = figures["kubernetesClients"], figures["proxmoxClients"]
    assert isinstance(kube, dict) and isinstance(pve, dict)
    print(f"{where}: {figures['lines']} lines of code run against a node, in {figures['files']} files")
    for kind, clients in (("Kubernetes", kube), ("Proxmox", pve)):
        listed = "; ".join(f"{path}: {', '.join(defined)}" for path, defined in clients.items())
        print(f"  {kind} clients: {len(clients)} ({listed})")
    by_file = figures["byFile"]
    assert isinstance(by_file, dict)
    for path, lines in by_file.items():
        print(f"  {lines:6d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
