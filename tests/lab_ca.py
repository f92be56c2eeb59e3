"""A lab's certificate authority, made in the test with openssl (CI has it): a CA, server certificates for the lab's
https mirrors under it, and a client certificate for a registry that asks for one. Nothing is fetched; every key
stays in the test's folder."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@dataclass(frozen=True)
class LabCa:
    folder: Path
    name: str

    @property
    def certificate(self) -> Path:
        return self.folder / f"{self.name}.crt"

    @property
    def key(self) -> Path:
        return self.folder / f"{self.name}.key"

    @property
    def pem(self) -> str:
        return self.certificate.read_text()

    def issue(self, name: str, hosts: tuple[str, ...] = (), client: bool = False) -> tuple[Path, Path]:
        """A certificate for `hosts` (a server) or a client certificate, signed by this CA: (certificate, key)."""
        key, request, certificate = (self.folder / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
        ext = self.folder / f"{name}.ext"
        usage = "clientAuth" if client else "serverAuth"
        names = ",".join(f"DNS:{host}" for host in hosts)
        ext.write_text(f"extendedKeyUsage={usage}\n" + (f"subjectAltName={names}\n" if names else ""))
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", key.name, "-out", request.name, "-subj", f"/CN={hosts[0] if hosts else name}",
                 cwd=self.folder)  # fmt: skip
        _openssl("x509", "-req", "-in", request.name, "-CA", self.certificate.name, "-CAkey", self.key.name,
                 "-CAcreateserial", "-days", "2", "-extfile", ext.name, "-out", certificate.name,
                 cwd=self.folder)  # fmt: skip
        return certificate, key


def make_lab_ca(folder: Path, name: str = "lab-ca") -> LabCa:
    """A CA (basicConstraints CA:TRUE, as `openssl req -x509` makes one) in `folder`."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the lab's CA (Debian's openssl package; .ci/run installs it)")
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN=gpu-pool test {name}",
             cwd=folder)  # fmt: skip
    return LabCa(folder, name)
