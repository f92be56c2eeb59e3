"""A chart archive as `helm package --version V --app-version V <dir>` makes it, for tests without the helm binary.

In git the gpu-operator chart says v1.0.0-devel; NVIDIA's release stamps the tag into Chart.yaml's version and
appVersion, and `helm package` writes one top-level folder named after the chart (helm's pkg/chartutil/save.go).
The e2e tier packages with the real helm binary and checks the program reads that archive the same way.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import yaml


def package_chart(chart_dir: Path, version: str, out_dir: Path) -> Path:
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    meta["version"], meta["appVersion"] = version, version
    name = meta["name"]
    archive = out_dir / f"{name}-{version}.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        stamped = yaml.safe_dump(meta, sort_keys=False).encode()
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(stamped)
        tar.addfile(info, io.BytesIO(stamped))
        for path in sorted(chart_dir.rglob("*")):
            relative = path.relative_to(chart_dir)
            if path.is_file() and relative != Path("Chart.yaml"):
                tar.add(path, arcname=f"{name}/{relative.as_posix()}")
    return archive
