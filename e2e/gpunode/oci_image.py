#!/usr/bin/env python3
"""Write an OCI image archive that `ctr images import` takes, from root-filesystem folders (one layer each).

The GPU node run (run.sh) cannot pull: its images are built on the spot from Debian packages and programs built
here. Standard library only (the GPU machine's python3). Layers are deterministic: sorted entries, owner root,
mtime 0, so the same folders give the same image digest.

    oci_image.py OUT.tar NAME --entrypoint '["/bin/sh","/smoke.sh"]' [--env K=V ...] DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path


def _layer(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = Path(root) / name
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)
    return buffer.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest.split(":", 1)[1])
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return digest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("name", help="the image's full name, e.g. docker.io/rancher/mirrored-pause:3.6")
    parser.add_argument("--entrypoint", default="[]", help="JSON list")
    parser.add_argument("--cmd", default="[]", help="JSON list")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("layers", nargs="+", type=Path)
    args = parser.parse_args()

    layers = [_layer(folder) for folder in args.layers]
    with tarfile.open(args.out, "w") as tar:
        layer_digests = [_blob(tar, data) for data in layers]
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Entrypoint": json.loads(args.entrypoint) or None,
                "Cmd": json.loads(args.cmd) or None,
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *args.env],
            },
            "rootfs": {"type": "layers", "diff_ids": layer_digests},
            "history": [{"created_by": f"gpu-pool e2e/gpunode/oci_image.py {folder.name}"} for folder in args.layers],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _blob(tar, config_bytes),
                "size": len(config_bytes),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest, "size": len(data)}
                for digest, data in zip(layer_digests, layers, strict=True)
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _blob(tar, manifest_bytes),
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": args.name,
                        "org.opencontainers.image.ref.name": args.name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        for name, data in (
            ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
            ("index.json", json.dumps(index).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    print(f"{args.name}: {args.out} ({sum(len(x) for x in layers) // 1024} KiB in {len(layers)} layers)")


if __name__ == "__main__":
    main()
