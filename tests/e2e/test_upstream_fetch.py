"""`make upstream`'s public path, for real, against loopback servers of the kinds it reads in public.

This test serves, on loopback, what each upstream publishes, made from the mirror's files the way the upstream
makes it: a Helm repository with the charts as NVIDIA's release packages them (`helm package --version <tag>
--app-version <tag>`, indexed by `helm repo index`), a Go module proxy directory (`<module>/@v/list`, `.info`, `.mod`,
`.zip`), and GitHub's raw file layout (`<owner>/<repo>/<commit>/<path>`). Then `python -m refdata.fetch` runs with
only those addresses changed: the real helm pulls, the real go downloads, the engine's own plugins answer `pulumi
package get-schema`, and every file must match refdata/digests.json. A file served with one byte changed is refused,
by name, and the installed folder is left as it was.

Two sources are not files the mirror keeps: DCGM's header (the mirror has the field list derived from it) and
kube-state-metrics' metric docs (the mirror has the names from their tables). They are served as a header of
`#define` lines and a docs page with one table, from which the fetch must derive the same list, byte for byte.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from refdata.fetch import COMPLETE, MIRROR_ONLY, load_digests
from refdata.sources import (
    SOURCES,
    SUMS_FOLDERS,
    DcgmFieldNames,
    GitHubArchive,
    GitHubFile,
    GoModuleFiles,
    HelmChart,
    KubeStateMetricNames,
)
from tests.e2e.engine import Engine
from tests.e2e.servers import Tools
from tests.environ import process_environment
from tests.loopback import Serving
from tests.refdata.github_archive import publish_archive

ROOT = Path(__file__).resolve().parents[2]
MODULE_TIME = "2026-08-20T00:00:00Z"


def _module_zip(path: Path, module: str, version: str, files: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}@{version}/go.mod", f"module {module}\n")
        for inside, data in files.items():
            archive.writestr(f"{module}@{version}/{inside}", data)


def _publish_module(proxy: Path, module: str, version: str, files: dict[str, bytes]) -> None:
    """A module as a GOPROXY directory serves it (go help goproxy); every path here is lower case."""
    at = proxy / module / "@v"
    at.mkdir(parents=True, exist_ok=True)
    with (at / "list").open("a") as listing:
        listing.write(version + "\n")
    (at / f"{version}.info").write_text(json.dumps({"Version": version, "Time": MODULE_TIME}))
    (at / f"{version}.mod").write_text(f"module {module}\n")
    _module_zip(at / f"{version}.zip", module, version, files)


def _raw(root: Path, file: GitHubFile, data: bytes) -> None:
    path = root / file.repo / file.commit / file.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class Loopback:
    """One HTTP server on a free loopback port, serving `root`; stopped when the test ends."""

    def __init__(self, root: Path) -> None:
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.serving = Serving(self.server)

    def stop(self) -> None:
        self.serving.stop()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(upstream: Path, e2e_tools: Tools, tmp_path: Path) -> Iterator[tuple[Loopback, Path]]:
    root = tmp_path / "served"
    server = Loopback(root)
    helm = str(e2e_tools.bin_dir / "helm")
    try:
        for source in SOURCES:
            if isinstance(source, HelmChart):
                tree = tmp_path / "trees" / source.version / source.name
                shutil.copytree(upstream / source.dest, tree, ignore=shutil.ignore_patterns(*MIRROR_ONLY))
                stamp = ["--version", source.version, "--app-version", source.version]
                subprocess.run([helm, "package", *stamp, str(tree), "-d", str(root / "helm")], check=True)
            elif isinstance(source, GoModuleFiles):
                files = {inside: (upstream / dest).read_bytes() for inside, dest in source.files.items()}
                _publish_module(root / "goproxy", source.module, source.version, files)
            elif isinstance(source, KubeStateMetricNames):
                names = (upstream / source.dest).read_text().split()
                table = "| Metric name | Metric type |\n| --- | --- |\n" + "".join(f"| {n} | Gauge |\n" for n in names)
                page = {"docs/metrics/workload/gpu-pool-served.md": f"# Served\n\n{table}".encode()}
                _publish_module(root / "goproxy", source.module, source.version, page)
            elif isinstance(source, GitHubFile):
                _raw(root / "raw", source, (upstream / source.dest).read_bytes())
            elif isinstance(source, GitHubArchive):
                publish_archive(root / "archive", source, upstream)
            elif isinstance(source, DcgmFieldNames):
                names = (upstream / source.dest).read_text().split()
                _raw(root / "raw", source.header, "".join(f"#define {n} {i}\n" for i, n in enumerate(names)).encode())
        repo = root / "helm"
        subprocess.run([helm, "repo", "index", str(repo), "--url", f"{server.url}/helm"], check=True)
        yield server, root
    finally:
        server.stop()


def _fetch(server: Loopback, e2e_tools: Tools, engine: Engine, work: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in process_environment().items() if not k.startswith(("PULUMI_", "GO", "UPSTREAM_"))}
    env.update(
        {
            "UPSTREAM_HELM_REPO": f"{server.url}/helm",
            "UPSTREAM_GITHUB_RAW": f"{server.url}/raw",
            "UPSTREAM_GITHUB_ARCHIVE": f"{server.url}/archive",
            "GOPROXY": f"{server.url}/goproxy",
            # The served zips are this test's, not the ones Go's checksum database knows; the recorded digests
            # are what checks them.
            "GOSUMDB": "off",
            "GOMODCACHE": str(work / "modcache"),
            "GOTOOLCHAIN": "local",
            # The engine's plugins on PATH answer get-schema; nothing is downloaded.
            "PATH": os.pathsep.join([str(engine.bin_dir), str(e2e_tools.bin_dir), env.get("PATH", "")]),
            "PULUMI_HOME": str(work / "pulumi-home"),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "refdata.fetch", "--dest", str(work / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_make_upstream_fetches_every_file_from_the_kinds_of_source_it_reads_and_checks_each_digest(
    served: tuple[Loopback, Path], e2e_tools: Tools, engine: Engine, tmp_path: Path
) -> None:
    server, _ = served

    done = _fetch(server, e2e_tools, engine, tmp_path)

    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    recorded = load_digests()
    sums = [f"{folder}/SHA256SUMS" for folder in SUMS_FOLDERS]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != COMPLETE) == sorted(
        [*recorded, *sums]
    )
    assert f"{len(recorded)} upstream files from the public sources, each matching its recorded digest" in done.stdout


def test_a_file_served_with_one_byte_changed_is_refused_by_name_and_nothing_is_installed(
    served: tuple[Loopback, Path], e2e_tools: Tools, engine: Engine, tmp_path: Path
) -> None:
    server, root = served
    counters = next(s for s in SOURCES if isinstance(s, GitHubFile) and s.dest.endswith("default-counters.csv"))
    served_file = root / "raw" / counters.repo / counters.commit / counters.path
    served_file.write_bytes(served_file.read_bytes() + b"\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept").write_text("a folder from an earlier run")

    done = _fetch(server, e2e_tools, engine, tmp_path)

    assert done.returncode == 1
    assert "dcgm-exporter/default-counters.csv: sha256" in done.stderr
    assert "github.com/NVIDIA/dcgm-exporter etc/default-counters.csv" in done.stderr
    assert "nothing installed" in done.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["kept"]
