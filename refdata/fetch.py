"""`make upstream`: fetch every file refdata/sources.py declares, check each against digests.json, install the set.

    python -m refdata.fetch [--dest .upstream] [--from MIRROR]

From the public sources by default (helm, go and pulumi do the fetching; the error names whichever is missing),
or with `--from` from a mirror laid out like the data folder (this build machine's `../shared/upstream` is one).
Nothing is installed unless every file matches its digest: a mismatch names the file, what was expected, what
came, and where it came from. The folder is replaced whole, and `.complete` in it records which digests it was
checked against, so the tests can tell a stale folder from a current one.

Environment (for mirrors of the public sources, and the loopback test): UPSTREAM_HELM_REPO (NVIDIA's Helm
repository), UPSTREAM_GITHUB_RAW (GitHub's raw file server), UPSTREAM_GITHUB_ARCHIVE (GitHub's source archives),
and Go's own GOPROXY, GOSUMDB, GOMODCACHE; HELM, GO
and PULUMI name the binaries when they are not on PATH (the e2e tier's in .tools/ are found too).

`--record` (maintainers, after changing sources.py) writes digests.json from a mirror, packaging each chart with
helm as NVIDIA's release does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from refdata.sources import (
    GITHUB_ARCHIVE,
    GITHUB_RAW,
    NVIDIA_HELM_REPO,
    SOURCES,
    SUMS_FOLDERS,
    DcgmFieldNames,
    Form,
    GitHubArchive,
    GitHubFile,
    GoModuleFiles,
    HelmChart,
    KubeStateMetricNames,
    PulumiSchema,
    Source,
)

ROOT = Path(__file__).resolve().parent.parent
DIGESTS = Path(__file__).resolve().parent / "digests.json"
DEFAULT_DEST = ROOT / ".upstream"
COMPLETE = ".complete"
# A mirror's own bookkeeping in a chart folder (../shared/upstream keeps one per chart); never part of a chart.
MIRROR_ONLY = frozenset({"SHA256SUMS"})
SUMS = "SHA256SUMS"


class FetchError(Exception):
    """What could not be fetched, and how to get it."""


# --- digests ----------------------------------------------------------------------------------------------------


def canonical(data: bytes, form: Form) -> bytes:
    """The bytes a digest is taken of (sources.py says why some files are compared parsed)."""
    if form == "bytes":
        return data
    document: Any = json.loads(data) if form == "schema" else yaml.safe_load(data)
    if form in ("chart-yaml", "schema") and isinstance(document, dict):
        document = {k: v for k, v in document.items() if k not in ("version", "appVersion")}
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(data: bytes, form: Form) -> str:
    return hashlib.sha256(canonical(data, form)).hexdigest()


def form_of(source: Source, dest: str) -> Form:
    if isinstance(source, PulumiSchema):
        return "schema"
    if isinstance(source, HelmChart):
        name = dest.rsplit("/", 1)[-1]
        if dest == f"{source.dest}/Chart.yaml":
            return "chart-yaml"
        if name in ("Chart.yaml", "Chart.lock"):
            return "yaml"
    return "bytes"


@dataclass(frozen=True)
class Recorded:
    sha256: str
    form: Form


def lock_id(path: Path = DIGESTS) -> str:
    """Which digests a data folder was checked against (its `.complete` holds this)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_digests(path: Path = DIGESTS) -> dict[str, Recorded]:
    raw: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))["files"]
    return {dest: Recorded(entry["sha256"], entry["form"]) for dest, entry in raw.items()}  # type: ignore[arg-type]


def dests_of(source: Source, recorded: Mapping[str, Recorded]) -> list[str]:
    """The files a source provides (a chart's are whatever digests.json lists under its folder)."""
    if isinstance(source, HelmChart | GitHubArchive):
        return sorted(d for d in recorded if d.startswith(source.dest + "/"))
    if isinstance(source, GoModuleFiles):
        return sorted(source.files.values())
    return [source.dest]


def describe(source: Source) -> str:
    if isinstance(source, HelmChart):
        return f"chart {source.name} {source.version} (helm pull)"
    if isinstance(source, GoModuleFiles | KubeStateMetricNames):
        return f"Go module {source.module}@{source.version}"
    if isinstance(source, GitHubFile):
        return f"github.com/{source.repo} {source.path} @ {source.commit[:12]}"
    if isinstance(source, GitHubArchive):
        return f"the source archive of github.com/{source.repo} @ {source.commit[:12]}"
    if isinstance(source, DcgmFieldNames):
        return f"the DCGM_FI_ names of {describe(source.header)}"
    return f"pulumi package get-schema {source.name}@{source.version}"


# --- tools --------------------------------------------------------------------------------------------------------


@dataclass
class Tools:
    """The programs the public sources need, found on PATH, in the e2e tier's .tools/, or named in the environment."""

    env: Mapping[str, str]
    missing: dict[str, str] = field(default_factory=dict)

    def find(self, name: str, why: str, fix: str) -> str | None:
        override = self.env.get(name.upper())
        # Named in the environment: that one or none. Else PATH, then what the e2e tier built.
        candidates: list[str | None] = (
            [override]
            if override
            else [
                shutil.which(name, path=self.env.get("PATH")),
                str(ROOT / ".tools" / "e2e" / "bin" / name),
                str(ROOT / ".tools" / "engine" / "bin" / name),
            ]
        )
        for candidate in candidates:
            if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
                return candidate
        self.missing[name] = f"{name} ({why}): {fix}"
        return None


def _run(argv: list[str], env: Mapping[str, str], cwd: Path, what: str) -> str:
    ran = subprocess.run(argv, env=dict(env), cwd=cwd, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        said = (ran.stderr.strip() or ran.stdout.strip() or "nothing").splitlines()[-1]
        raise FetchError(f"{what}: `{' '.join(argv[:3])} ...` exited {ran.returncode}: {said}")
    return ran.stdout


# --- the public sources -------------------------------------------------------------------------------------------


def _helm_pull(chart: HelmChart, helm: str, env: Mapping[str, str], work: Path) -> dict[str, bytes]:
    repo = env.get("UPSTREAM_HELM_REPO", NVIDIA_HELM_REPO)
    out = work / f"helm-{chart.version}"
    out.mkdir()
    argv = [helm, "pull", chart.name, "--repo", repo, "--version", chart.version, "--untar", "--untardir", str(out)]
    _run(argv, env, work, f"helm pull of {chart.name} {chart.version} from {repo}")
    unpacked = out / chart.name
    return {f"{chart.dest}/{p.relative_to(unpacked).as_posix()}": p.read_bytes() for p in _files(unpacked)}


def _go_module_dir(module: str, version: str, go: str, env: Mapping[str, str], work: Path) -> Path:
    # Outside any module (an empty folder), so only the named module is resolved; -mod=mod so a GOFLAGS of
    # -mod=readonly in the caller's environment does not stop a download that has no go.sum to be read against.
    go_env = {**env, "GOFLAGS": "-mod=mod -modcacherw", "GO111MODULE": "on", "GOTOOLCHAIN": "local"}
    blank = work / "go-blank"
    blank.mkdir(exist_ok=True)
    out = _run([go, "mod", "download", "-json", f"{module}@{version}"], go_env, blank, f"go mod download {module}")
    answer = json.loads(out)
    if answer.get("Error") or not answer.get("Dir"):
        raise FetchError(f"go mod download {module}@{version}: {answer.get('Error', 'no module directory')}")
    return Path(answer["Dir"])


def _github_file(file: GitHubFile, env: Mapping[str, str]) -> bytes:
    base = env.get("UPSTREAM_GITHUB_RAW", GITHUB_RAW).rstrip("/")
    url = f"{base}/{file.repo}/{file.commit}/{file.path}"
    try:
        with urllib.request.urlopen(url, timeout=120) as answer:
            data: bytes = answer.read()
            return data
    except (urllib.error.URLError, OSError) as error:
        raise FetchError(f"GET {url}: {error}") from None


def _github_archive(archive: GitHubArchive, dests: list[str], env: Mapping[str, str]) -> dict[str, bytes]:
    """The files `dests` names, read from the commit's archive as it streams in (a repository's archive can be
    large; the rest is never kept). Only regular files count: a link in the archive where a file is expected is
    missing, never followed."""
    base = env.get("UPSTREAM_GITHUB_ARCHIVE", GITHUB_ARCHIVE).rstrip("/")
    url = f"{base}/{archive.repo}/tar.gz/{archive.commit}"
    wanted: dict[str, str] = {}
    for dest in dests:
        place = dest[len(archive.dest) + 1 :]
        wanted[archive.renames.get(place, place)] = dest
    got: dict[str, bytes] = {}
    try:
        with urllib.request.urlopen(url, timeout=300) as answer, tarfile.open(fileobj=answer, mode="r|gz") as tar:
            for member in tar:
                # Every member sits in one top folder, `<repo>-<commit>/`.
                _, _, inside = member.name.partition("/")
                if member.isfile() and inside in wanted:
                    data = tar.extractfile(member)
                    assert data is not None  # a regular file always has its data
                    got[wanted[inside]] = data.read()
    except (urllib.error.URLError, OSError, tarfile.TarError) as error:
        raise FetchError(f"GET {url}: {error}") from None
    return got


def sha256sums(got: Mapping[str, bytes], folder: str) -> bytes:
    """`SHA256SUMS` of `folder` as `sha256sum` writes it (`find . -type f | sort`), for the build scripts' `-c`."""
    prefix = folder + "/"
    lines = (
        f"{hashlib.sha256(data).hexdigest()}  ./{dest[len(prefix) :]}\n"
        for dest, data in sorted(got.items())
        if dest.startswith(prefix) and not dest.endswith("/" + SUMS)
    )
    return "".join(lines).encode()


DCGM_DEFINE = re.compile(rb"^\s*#\s*define\s+(DCGM_FI_[A-Za-z0-9_]+)", re.MULTILINE)


def dcgm_field_names(header: bytes) -> bytes:
    """As `grep -oE '^\\s*#\\s*define\\s+DCGM_FI_[A-Za-z0-9_]+' | awk '{print $NF}' | sort -u` (dcgm/SOURCE.md)."""
    return b"".join(name + b"\n" for name in sorted(set(DCGM_DEFINE.findall(header))))


KSM_ROW = re.compile(r"^\|\s*`?(kube_[a-z0-9_]+)`?\s*\|", re.MULTILINE)


def kube_state_metric_names(docs: Path) -> bytes:
    """The `kube_*` names in the first column of the metric tables (upstream kube-state-metrics/SOURCE.md)."""
    names = {name for md in sorted(docs.rglob("*.md")) for name in KSM_ROW.findall(md.read_text(encoding="utf-8"))}
    return "".join(f"{name}\n" for name in sorted(names)).encode()


def _get_schema(schema: PulumiSchema, pulumi: str, env: Mapping[str, str], work: Path) -> bytes:
    """From the plugin the engine would run: one on PATH (as the source-built engine puts them), else the one
    `pulumi plugin install` put in PULUMI_HOME (the CLI installs it from Pulumi's registry when it is missing)."""
    binary = f"pulumi-resource-{schema.name}"
    on_path = shutil.which(binary, path=env.get("PATH")) or shutil.which(binary, path=str(Path(pulumi).parent))
    source = on_path or f"{schema.name}@{schema.version}"
    quiet = {**env, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    out = _run([pulumi, "package", "get-schema", source], quiet, work, f"pulumi package get-schema {source}")
    return out.encode()


def fetch_public(
    sources: tuple[Source, ...], recorded: Mapping[str, Recorded], env: Mapping[str, str], work: Path
) -> dict[str, bytes]:
    tools = Tools(env)
    helm = go = pulumi = None
    if any(isinstance(s, HelmChart) for s in sources):
        helm = tools.find(
            "helm", "the GPU Operator charts", "install Helm 3.8+, or `make e2e-tools` builds the pinned one"
        )
    if any(isinstance(s, GoModuleFiles | KubeStateMetricNames) for s in sources):
        go = tools.find("go", "Kyverno's and the Prometheus Operator's CRDs", "install Go 1.26 (the e2e tier needs it)")
    if any(isinstance(s, PulumiSchema) for s in sources):
        pulumi = tools.find(
            "pulumi",
            "the provider schemas",
            "install the Pulumi CLI (then `pulumi plugin install` fetches the pinned plugins), or `make engine-tools` "
            "builds it and the plugins",
        )
    if tools.missing:
        raise FetchError(
            "missing "
            + "; ".join(tools.missing.values())
            + " (or take every file from a mirror: make upstream UPSTREAM_FROM=<dir>)"
        )
    got: dict[str, bytes] = {}
    for source in sources:
        if isinstance(source, HelmChart):
            assert helm
            got.update(_helm_pull(source, helm, env, work))
        elif isinstance(source, GoModuleFiles):
            assert go
            module_dir = _go_module_dir(source.module, source.version, go, env, work)
            for inside, dest in source.files.items():
                path = module_dir / inside
                if not path.is_file():
                    raise FetchError(f"{describe(source)} has no {inside}")
                got[dest] = path.read_bytes()
        elif isinstance(source, KubeStateMetricNames):
            assert go
            module_dir = _go_module_dir(source.module, source.version, go, env, work)
            got[source.dest] = kube_state_metric_names(module_dir / "docs" / "metrics")
        elif isinstance(source, GitHubFile):
            got[source.dest] = _github_file(source, env)
        elif isinstance(source, GitHubArchive):
            got.update(_github_archive(source, dests_of(source, recorded), env))
        elif isinstance(source, DcgmFieldNames):
            got[source.dest] = dcgm_field_names(_github_file(source.header, env))
        else:
            assert pulumi
            got[source.dest] = _get_schema(source, pulumi, env, work)
    return got


def _files(root: Path) -> Iterator[Path]:
    return (p for p in sorted(root.rglob("*")) if p.is_file())


def fetch_mirror(sources: tuple[Source, ...], recorded: Mapping[str, Recorded], mirror: Path) -> dict[str, bytes]:
    """Every recorded file from the mirror (a chart folder's extra files are the mirror's, not the chart's)."""
    if not mirror.is_dir():
        raise FetchError(f"the mirror {mirror} is not a folder")
    got: dict[str, bytes] = {}
    for source in sources:
        for dest in dests_of(source, recorded):
            path = mirror / dest
            if path.is_file():
                got[dest] = path.read_bytes()
    return got


# --- checking and installing ----------------------------------------------------------------------------------------


def problems(
    sources: tuple[Source, ...], recorded: Mapping[str, Recorded], got: Mapping[str, bytes], origin: str
) -> list[str]:
    found: list[str] = []
    for source in sources:
        expected = dests_of(source, recorded)
        if not expected:
            found.append(f"{describe(source)}: digests.json records no file for it (run --record)")
        for dest in expected:
            if dest not in got:
                found.append(f"{dest}: missing from {origin} ({describe(source)})")
                continue
            want = recorded[dest]
            have = digest(got[dest], want.form)
            if have != want.sha256:
                found.append(
                    f"{dest}: sha256 {have} ({want.form}), recorded {want.sha256}; from {origin} ({describe(source)})"
                )
        if isinstance(source, HelmChart):
            extra = sorted(d for d in got if d.startswith(source.dest + "/") and d not in recorded)
            found += [f"{d}: not a file of {describe(source)} as recorded (from {origin})" for d in extra]
    return found


def install(got: Mapping[str, bytes], dest: Path, lock: str) -> None:
    """Write the files to a fresh folder beside `dest`, then swap it in: a failed run leaves `dest` as it was.
    Each source tree's `SHA256SUMS` is written from the checked files (the build scripts check it again)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-", dir=dest.parent))
    staging.chmod(0o755)
    sums = {f"{folder}/{SUMS}": sha256sums(got, folder) for folder in SUMS_FOLDERS}
    for relative, data in {**got, **{k: v for k, v in sums.items() if v}}.items():
        path = staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (staging / COMPLETE).write_text(lock + "\n", encoding="utf-8")
    old = dest.with_name(f"{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def is_complete(folder: Path) -> bool:
    """True when `folder` was filled by this tool against the digests recorded now."""
    stamp = folder / COMPLETE
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == lock_id()


def record(mirror: Path, env: Mapping[str, str], work: Path) -> dict[str, dict[str, str]]:
    """Digests from a mirror, each chart packaged and unpacked by helm as NVIDIA's release does."""
    tools = Tools(env)
    helm = tools.find("helm", "packaging the charts", "make e2e-tools")
    if helm is None:
        raise FetchError("; ".join(tools.missing.values()))
    files: dict[str, dict[str, str]] = {}
    for source in SOURCES:
        if isinstance(source, HelmChart):
            tree = work / f"tree-{source.version}" / source.name
            shutil.copytree(mirror / source.dest, tree, ignore=shutil.ignore_patterns(*MIRROR_ONLY))
            stamp = ["--version", source.version, "--app-version", source.version]
            _run([helm, "package", *stamp, str(tree), "-d", str(work)], env, work, "helm package")
            unpacked = work / f"unpacked-{source.version}"
            unpacked.mkdir()
            archive = work / f"{source.name}-{source.version}.tgz"
            _run(["tar", "-xzf", str(archive), "-C", str(unpacked)], env, work, "tar")
            root = unpacked / source.name
            pairs = {f"{source.dest}/{p.relative_to(root).as_posix()}": p.read_bytes() for p in _files(root)}
        elif isinstance(source, GitHubArchive):
            # The mirror keeps the part of the tree the builds read; its SHA256SUMS is bookkeeping (written anew).
            tree = mirror / source.dest
            pairs = {f"{source.dest}/{p.relative_to(tree).as_posix()}": p.read_bytes() for p in _files(tree)}
        else:
            pairs = {d: (mirror / d).read_bytes() for d in dests_of(source, {})}
        for dest, data in pairs.items():
            form = form_of(source, dest)
            files[dest] = {"sha256": digest(data, form), "form": form}
    return dict(sorted(files.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="the data folder (default .upstream/)")
    parser.add_argument("--from", dest="mirror", type=Path, help="a mirror laid out like the data folder")
    parser.add_argument("--record", action="store_true", help="write digests.json from --from (maintainers)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gpu-pool-upstream-") as tmp:
        work = Path(tmp)
        try:
            if args.record:
                if args.mirror is None:
                    raise FetchError("--record reads a mirror: give --from")
                files = record(args.mirror, env, work)
                note = "Written by `python -m refdata.fetch --record --from <mirror>`; forms: refdata/sources.py."
                DIGESTS.write_text(json.dumps({"note": note, "files": files}, indent=1) + "\n", encoding="utf-8")
                print(f"recorded {len(files)} digests in {DIGESTS.relative_to(ROOT)}")
                return 0
            recorded = load_digests()
            origin = f"the mirror {args.mirror}" if args.mirror else "the public sources"
            got = (
                fetch_mirror(SOURCES, recorded, args.mirror)
                if args.mirror
                else fetch_public(SOURCES, recorded, env, work)
            )
        except FetchError as error:
            print(f"make upstream: {error}", file=sys.stderr)
            return 1
        found = problems(SOURCES, recorded, got, origin)
        if found:
            print(
                f"make upstream: {len(found)} file(s) do not match their recorded digest; nothing installed:",
                file=sys.stderr,
            )
            for line in found:
                print(f"  {line}", file=sys.stderr)
            return 1
        install({d: got[d] for d in recorded}, args.dest, lock_id())
    print(f"{len(recorded)} upstream files from {origin}, each matching its recorded digest, in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
