"""`make upstream` leaves everything `make e2e-tools` reads: the GPU Operator's source and the Pulumi build sources,
from GitHub's source archives (and raw files) played by a loopback server, each file checked against
refdata/digests.json before it is installed, with the `SHA256SUMS` the build scripts check written from the checked
files. The build scripts then read `.upstream/` first (e2e/upstream-dir.sh).

The served archives are made from the mirror's files the way GitHub makes one (tests/refdata/github_archive.py)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from refdata.fetch import COMPLETE, DIGESTS, ROOT, dests_of, fetch_public, install, load_digests, lock_id, problems
from refdata.sources import SOURCES, SUMS_FOLDERS, GitHubArchive, GitHubFile, Source
from tests.loopback import serving
from tests.refdata.github_archive import publish_archive

SECOND_TIER: tuple[Source, ...] = tuple(
    s
    for s in SOURCES
    if isinstance(s, GitHubArchive) or (isinstance(s, GitHubFile) and s.dest.startswith(SUMS_FOLDERS))
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _publish(root: Path, upstream: Path, changed: str | None = None, linked: str | None = None) -> None:
    """What GitHub serves for each second-tier source, from the mirror's files."""
    for source in SECOND_TIER:
        if isinstance(source, GitHubFile):
            served = root / "raw" / source.repo / source.commit / source.path
            served.parent.mkdir(parents=True, exist_ok=True)
            served.write_bytes((upstream / source.dest).read_bytes())
        else:
            assert isinstance(source, GitHubArchive)
            publish_archive(root / "archive", source, upstream, changed, linked)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    root = tmp_path / "served"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield root, {"UPSTREAM_GITHUB_ARCHIVE": f"{url}/archive", "UPSTREAM_GITHUB_RAW": f"{url}/raw"}


def test_the_second_tier_sources_are_every_file_the_build_scripts_check(upstream: Path) -> None:
    # What e2e/build-cluster.sh and e2e/build-engine.sh read is what their SHA256SUMS list (they check it first).
    recorded = load_digests()
    for folder in SUMS_FOLDERS:
        listed = {
            f"{folder}/{line.split('  ', 1)[1].removeprefix('./')}"
            for line in (upstream / folder / "SHA256SUMS").read_text().splitlines()
        }
        provided = {d for s in SECOND_TIER for d in dests_of(s, recorded) if d.startswith(folder + "/")}

        assert provided == listed


def test_from_github_archives_every_file_the_build_reads_is_fetched_checked_and_summed(
    upstream: Path, github: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = github
    _publish(root, upstream)
    recorded = load_digests()

    got = fetch_public(SECOND_TIER, recorded, env, tmp_path)
    assert problems(SECOND_TIER, recorded, got, "loopback") == []
    install(got, tmp_path / "out", lock_id())

    out = tmp_path / "out"
    for folder in SUMS_FOLDERS:
        # The build scripts' own check, on what was installed; and the same list the mirror's SHA256SUMS holds.
        check = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out / folder, check=False)
        assert check.returncode == 0
        mirror = sorted((upstream / folder / "SHA256SUMS").read_text().splitlines())
        assert sorted((out / folder / "SHA256SUMS").read_text().splitlines()) == mirror
    assert not (out / "gpu-operator-src" / "v26.7.0" / "README.md").exists()
    assert (out / "pulumi-build" / "pulumi-kubernetes" / "Makefile.upstream").is_file()


def test_an_archive_file_with_one_byte_changed_is_named_with_its_archive(
    upstream: Path, github: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = github
    go_sum = "gpu-operator-src/v26.7.0/go.sum"
    _publish(root, upstream, changed=go_sum)
    recorded = load_digests()

    found = problems(SECOND_TIER, recorded, fetch_public(SECOND_TIER, recorded, env, tmp_path), "loopback")

    assert len(found) == 1
    assert found[0].startswith(f"{go_sum}: sha256 ")
    assert "the source archive of github.com/NVIDIA/gpu-operator @ 10ee5b3638b8" in found[0]


def test_a_link_in_an_archive_where_a_file_belongs_is_missing_never_followed(
    upstream: Path, github: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = github
    main_go = "pulumi-build/pulumi-command/provider/cmd/pulumi-resource-command/main.go"
    _publish(root, upstream, linked=main_go)
    recorded = load_digests()

    found = problems(SECOND_TIER, recorded, fetch_public(SECOND_TIER, recorded, env, tmp_path), "loopback")

    assert found == [
        f"{main_go}: missing from loopback (the source archive of github.com/pulumi/pulumi-command @ 7f3eb6f3b77c)"
    ]


# --- the build scripts read .upstream/ first --------------------------------------------------------------------


def _resolve(repo: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = 'set -euo pipefail; source "$1/e2e/upstream-dir.sh"; echo "$UPSTREAM"'
    return subprocess.run(
        ["bash", "-c", script, "resolve", str(repo)],
        env={"PATH": "/usr/bin:/bin", "REPO_DIR": str(repo), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    repo = tmp_path / "gpu-pool"
    (repo / "e2e").mkdir(parents=True)
    (repo / "refdata").mkdir()
    shutil.copy(ROOT / "e2e" / "upstream-dir.sh", repo / "e2e")
    shutil.copy(DIGESTS, repo / "refdata")
    return repo


def test_the_build_scripts_read_a_completed_upstream_folder_before_the_mirror(clone: Path) -> None:
    (clone / ".upstream").mkdir()
    (clone / ".upstream" / COMPLETE).write_text(hashlib.sha256(DIGESTS.read_bytes()).hexdigest() + "\n")

    assert _resolve(clone).stdout.strip() == str(clone / ".upstream")
    assert _resolve(clone, {"GPU_POOL_UPSTREAM_DIR": "/a/mirror"}).stdout.strip() == "/a/mirror"


def test_without_an_upstream_folder_the_build_scripts_read_the_mirror_beside_the_clone(clone: Path) -> None:
    assert _resolve(clone).stdout.strip() == str(clone / ".." / "shared" / "upstream")


def test_an_upstream_folder_fetched_against_other_digests_stops_the_build_with_the_fix(clone: Path) -> None:
    (clone / ".upstream").mkdir()
    (clone / ".upstream" / COMPLETE).write_text("0" * 64 + "\n")

    done = _resolve(clone)

    assert done.returncode == 1
    assert "was not completed against refdata/digests.json as it is now: run make upstream" in done.stderr
