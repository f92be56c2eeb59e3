"""GitHub's source archive of a commit, made from the mirror's files the way GitHub makes one: a gzip'd tar at
`<base>/<owner>/<repo>/tar.gz/<commit>` with one top folder `<repo>-<commit>/` holding the repository's paths, more
files than a build needs (a README here stands for them)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from refdata.fetch import dests_of, load_digests
from refdata.sources import GitHubArchive


def publish_archive(
    root: Path, source: GitHubArchive, upstream: Path, changed: str | None = None, linked: str | None = None
) -> None:
    """`changed` (a data-folder path) is served with one byte more; `linked` as a symbolic link out of the tree."""
    path = root / source.repo / "tar.gz" / source.commit
    path.parent.mkdir(parents=True, exist_ok=True)
    top = f"{source.repo.split('/')[1]}-{source.commit}"
    with tarfile.open(path, "w:gz") as tar:
        extra = b"not a file the build reads\n"
        info = tarfile.TarInfo(f"{top}/README.md")
        info.size = len(extra)
        tar.addfile(info, io.BytesIO(extra))
        for dest in dests_of(source, load_digests()):
            place = dest[len(source.dest) + 1 :]
            info = tarfile.TarInfo(f"{top}/{source.renames.get(place, place)}")
            if dest == linked:
                info.type = tarfile.SYMTYPE
                info.linkname = "../../../../etc/passwd"
                tar.addfile(info)
                continue
            data = (upstream / dest).read_bytes() + (b"\n" if dest == changed else b"")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
