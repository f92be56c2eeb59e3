"""A Helm chart on disk (`gpuOperator.chart`): a directory or a `helm package` archive, read without Helm.

Why the program reads the chart itself: an air-gapped lab (and any offline preview) has no chart repository, and
the CRDs the chart ships in `crds/` are registered by the program as its own resources (Helm never upgrades
`crds/`). Helm's layout, which this follows: an archive holds one top-level folder named after the chart; the
chart's `Chart.yaml` carries `name` and `version`; CRDs are the files under `crds/` of the chart and of each
subchart under `charts/` (a folder or a nested archive), Helm's own rule for `crds/` (helm.sh/docs
chart_best_practices/custom_resource_definitions, "Method 1"). Only `.yaml`/`.yml`/`.json` files count there, as in
Helm's `chart.CRDObjects`.
"""

from __future__ import annotations

import functools
import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# The CRDs are megabytes of YAML (v26.7.0's ClusterPolicy alone is 1.4 MB): libyaml's parser, where PyYAML has it,
# reads them ten times faster than the pure-Python one, to the same documents.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ChartSourceError(ValueError):
    """The path is not a usable chart: the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class CrdFile:
    """One file of a chart's `crds/` folder: where it sits in the chart and the CRD documents in it."""

    path: str
    documents: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class LocalChart:
    name: str
    version: str
    app_version: str
    crd_files: tuple[CrdFile, ...]

    def crds(self) -> list[dict[str, Any]]:
        """Every CustomResourceDefinition of the chart and its subcharts, in file order."""
        return [doc for f in self.crd_files for doc in f.documents if doc.get("kind") == "CustomResourceDefinition"]


def _chart_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ChartSourceError(f"{where} is not valid YAML ({error.__class__.__name__})") from None
    if not isinstance(loaded, dict) or not loaded.get("name") or not loaded.get("version"):
        raise ChartSourceError(f"{where} has no name and version, so it is not a Helm chart's Chart.yaml")
    return loaded


def _crd_documents(text: str, where: str) -> tuple[dict[str, Any], ...]:
    try:
        return tuple(d for d in yaml.load_all(text, Loader=_SAFE_LOADER) if isinstance(d, dict))
    except yaml.YAMLError as error:
        raise ChartSourceError(f"{where} is not valid YAML ({error.__class__.__name__})") from None


def _is_crd_file(relative: PurePosixPath) -> bool:
    """`crds/x.yaml` of the chart or `charts/<sub>/crds/x.yaml` of a subchart (any depth)."""
    parts = relative.parts
    if len(parts) < 2 or parts[-2] != "crds" or not relative.name.endswith(_MANIFEST_SUFFIXES):
        return False
    chart_parts = parts[:-2]
    # The chart itself, or charts/<sub>, charts/<sub>/charts/<subsub>, ...
    return len(chart_parts) % 2 == 0 and all(p == "charts" for p in chart_parts[::2])


def _read_directory(root: Path) -> LocalChart:
    chart_file = root / "Chart.yaml"
    if not chart_file.is_file():
        raise ChartSourceError(f"'{root}' has no Chart.yaml, so it is not a Helm chart directory")
    meta = _chart_yaml(chart_file.read_text(encoding="utf-8"), f"'{chart_file}'")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    crds = [
        CrdFile(str(rel), _crd_documents(p.read_text(encoding="utf-8"), f"'{p}'"))
        for p in files
        if _is_crd_file(rel := PurePosixPath(p.relative_to(root).as_posix()))
    ]
    crds += [
        CrdFile(f"{p.relative_to(root).as_posix()}:{sub.path}", sub.documents)
        for p in files
        if p.parent == root / "charts" and p.name.endswith(".tgz")
        for sub in _read_archive_bytes(p.read_bytes(), f"'{p}'").crd_files
    ]
    return LocalChart(str(meta["name"]), str(meta["version"]), str(meta.get("appVersion", "")), tuple(crds))


def _archive_members(archive: tarfile.TarFile) -> Iterator[tuple[PurePosixPath, bytes]]:
    for member in archive.getmembers():
        if not member.isfile():
            continue
        handle = archive.extractfile(member)
        if handle is not None:
            yield PurePosixPath(member.name), handle.read()


def _read_archive_bytes(data: bytes, where: str) -> LocalChart:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            members = dict(_archive_members(archive))
    except (tarfile.TarError, OSError, EOFError):
        raise ChartSourceError(f"{where} is not a gzipped tar archive, so not a chart made by `helm package`") from None
    tops = {path.parts[0] for path in members if len(path.parts) > 1}
    if len(tops) != 1:
        raise ChartSourceError(f"{where} does not hold exactly one chart folder, as `helm package` makes it")
    (top,) = tops
    chart_file = PurePosixPath(top, "Chart.yaml")
    if chart_file not in members:
        raise ChartSourceError(f"{where} has no {top}/Chart.yaml, so it is not a Helm chart archive")
    meta = _chart_yaml(members[chart_file].decode("utf-8"), f"{where}:{chart_file}")
    crds: list[CrdFile] = []
    for path in sorted(members):
        relative = PurePosixPath(*path.parts[1:])
        if _is_crd_file(relative):
            crds.append(CrdFile(str(relative), _crd_documents(members[path].decode("utf-8"), f"{where}:{path}")))
        elif relative.parent == PurePosixPath("charts") and relative.name.endswith(".tgz"):
            nested = _read_archive_bytes(members[path], f"{where}:{path}")
            crds += [CrdFile(f"{relative}:{sub.path}", sub.documents) for sub in nested.crd_files]
    return LocalChart(str(meta["name"]), str(meta["version"]), str(meta.get("appVersion", "")), tuple(crds))


def read_local_chart(path: Path) -> LocalChart:
    """The chart at `path` (a chart directory or a .tgz made by `helm package`); ChartSourceError if it is not one.

    Read once per process while the file is unchanged: validation, the cluster preflight and the component all ask
    for it, and parsing its CRDs is most of what a preview with a chart on disk costs (`make bench`). Callers treat
    the documents as read-only (build_operator_crds copies only the metadata it annotates)."""
    if path.is_dir():
        return _read_directory(path)
    if path.is_file():
        stat = path.stat()
        return _read_archive_cached(path.resolve(), stat.st_mtime_ns, stat.st_size, str(path))
    raise ChartSourceError(f"'{path}' does not exist (relative paths are read from the project directory)")


@functools.lru_cache(maxsize=8)
def _read_archive_cached(path: Path, mtime_ns: int, size: int, shown: str) -> LocalChart:
    return _read_archive_bytes(path.read_bytes(), f"'{shown}'")
