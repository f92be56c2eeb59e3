"""Secrets for the offline preview from the environment or a file outside the repo, never from an echoed make line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.secret_sources import SecretSourceError, secrets_from_environment
from offline.runner import ROOT_DIR

TOKEN = "pulumi@pve!gpu-pool=5e471e11-0b1c-4d2e-9f3a-7f3a91c0ffee"
JOIN = "K10" + "93a1" * 16 + "::server:sentinel-env-password"


def test_each_secret_has_its_environment_variable() -> None:
    found = secrets_from_environment(
        {"GPU_POOL_SECRET_PROXMOXAPITOKEN": TOKEN, "GPU_POOL_SECRET_RKE2TOKEN": JOIN}, ROOT_DIR
    )
    assert found == {"proxmoxApiToken": TOKEN, "rke2Token": JOIN}


def test_a_secrets_file_outside_the_repo_is_read_and_the_environment_wins_over_it(tmp_path: Path) -> None:
    path = tmp_path / "lab.env"
    path.write_text(f"# my lab\ngpu-pool:proxmoxApiToken={TOKEN}\nrke2Token=from-file\n")
    environ = {"GPU_POOL_SECRETS_FILE": str(path), "GPU_POOL_SECRET_RKE2TOKEN": JOIN}
    assert secrets_from_environment(environ, ROOT_DIR) == {"proxmoxApiToken": TOKEN, "rke2Token": JOIN}


def test_a_secrets_file_inside_the_repo_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "lab.env").write_text(f"rke2Token={JOIN}\n")
    with pytest.raises(SecretSourceError, match=r"inside the repository, where a commit can take it"):
        secrets_from_environment({"GPU_POOL_SECRETS_FILE": str(repo / "lab.env")}, repo)


def test_a_malformed_line_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "lab.env"
    path.write_text(f"{JOIN}\n")
    with pytest.raises(SecretSourceError) as raised:
        secrets_from_environment({"GPU_POOL_SECRETS_FILE": str(path)}, ROOT_DIR)
    assert "line 1 is not KEY=VALUE (value not shown)" in str(raised.value) and JOIN not in str(raised.value)


def test_the_preview_uses_secrets_from_the_environment_and_never_prints_or_writes_them(tmp_path: Path) -> None:
    environ = {**os.environ, "GPU_POOL_SECRET_PROXMOXAPITOKEN": TOKEN, "GPU_POOL_SECRET_RKE2TOKEN": JOIN}
    out = tmp_path / "o"
    result = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "prod", "--out", str(out)],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False, env=environ,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "placeholders used" not in result.stdout, "both secrets came from the environment"
    written = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    for secret in (TOKEN, JOIN):
        assert secret not in result.stdout + result.stderr and secret not in written


def test_the_preview_tells_how_to_give_secrets_without_the_command_line(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPU_POOL_SECRET")}
    result = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "prod", "--out", str(tmp_path / "o"), "--quiet"],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False, env=environ,
    )  # fmt: skip
    assert "GPU_POOL_SECRET_RKE2TOKEN" in result.stdout and 'ARGS="--secret' not in result.stdout


def _diff(tmp_path: Path, **secrets: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPU_POOL_SECRET")}
    earlier = tmp_path / "Pulumi.prod.yaml"
    earlier.write_text((ROOT_DIR / "examples" / "diff" / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    argv = ["--stack", "prod", "--before", str(earlier), "--out", str(tmp_path / "o")]
    return subprocess.run(
        [sys.executable, "-m", "offline.diff", *argv],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False, env={**environ, **secrets},
    )  # fmt: skip


def test_make_diff_reads_the_secrets_from_the_environment_and_never_prints_or_writes_them(tmp_path: Path) -> None:
    result = _diff(tmp_path, GPU_POOL_SECRET_PROXMOXAPITOKEN=TOKEN, GPU_POOL_SECRET_RKE2TOKEN=JOIN)

    assert result.returncode == 0, result.stderr
    written = (tmp_path / "o" / "diff.json").read_text(encoding="utf-8")
    for secret in (TOKEN, JOIN, "sentinel-env-password"):
        assert secret not in result.stdout + result.stderr and secret not in written


def test_make_diff_refuses_a_malformed_secret_from_the_environment_as_the_preview_does_without_showing_it(
    tmp_path: Path,
) -> None:
    result = _diff(tmp_path, GPU_POOL_SECRET_RKE2TOKEN="K10sentinel-bad-token")

    assert result.returncode == 2
    assert "gpu-pool:rke2Token" in result.stderr and "sentinel-bad-token" not in result.stdout + result.stderr
