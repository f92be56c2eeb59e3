"""`rke2.installer`: a lab with no route out runs RKE2's install script from its own server and has it take the
pinned release's files from there (INSTALL_RKE2_ARTIFACT_URL, as install.sh at v1.33.5+rke2r1 reads it:
`<artifacts>/<version, + as %2B>/sha256sum-<arch>.txt` and `rke2.linux-<arch>.tar.gz`), at first boot and in the
upgrade step alike. The rendered commands are run against a loopback server that plays the lab's mirror."""

from __future__ import annotations

import copy
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.cloud_init import build_user_data, user_data_document
from components.gpu_failure_domain.first_boot import step_commands
from components.gpu_failure_domain.rollout import rke2_upgrade_command
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.stack import StackConfig
from offline.runner import read_stack_file

TOKEN = "K10" + "0" * 64 + "::server:test"
ARTIFACTS = "http://files.lab.internal/rke2/releases"
# What the mirror's install script says: the variables it was run with, one a line.
FAKE_INSTALLER = (
    '#!/bin/sh\necho "type=$INSTALL_RKE2_TYPE version=$INSTALL_RKE2_VERSION artifacts=$INSTALL_RKE2_ARTIFACT_URL"\n'
)


def _stack(installer: dict[str, Any] | None) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    if installer is not None:
        raw["rke2"]["installer"] = installer
    return validate_stack(raw)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    served = tmp_path / "served"
    served.mkdir()
    (served / "install.sh").write_text(FAKE_INSTALLER)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def _shims(root: Path) -> dict[str, str]:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    # sudo takes VAR=value words before the command (allowed where the command matched is ALL, as the VM's
    # sudoers line says); `env` does the same.
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec env "$@"\n')
    (bin_dir / "systemctl").write_text("#!/bin/sh\n")
    for shim in ("sudo", "systemctl"):
        (bin_dir / shim).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_the_upgrade_step_runs_the_mirrors_script_with_the_artifact_url_the_pinned_script_reads(
    tmp_path: Path, mirror: str
) -> None:
    stack = _stack({"script": f"{mirror}/install.sh", "artifacts": ARTIFACTS})

    command = rke2_upgrade_command(stack.rke2.version, installer=stack.rke2.installer)

    said = subprocess.run(
        ["sh", "-c", command.replace("/tmp/install-rke2.sh", str(tmp_path / "install.sh"))],
        capture_output=True,
        text=True,
        env=_shims(tmp_path),
    )
    assert said.returncode == 0, said.stderr
    assert f"type=agent version={stack.rke2.version} artifacts={ARTIFACTS}" in said.stdout


def test_the_first_boot_runs_the_mirrors_script_with_the_artifact_url(tmp_path: Path, mirror: str) -> None:
    stack = _stack({"script": f"{mirror}/install.sh", "artifacts": ARTIFACTS})
    steps = step_commands(user_data_document(stack.failure_domains[0], stack.rke2, TOKEN)["runcmd"])
    fetch, install = steps["fetch-installer"][1], steps["install-rke2"][1]

    script = "; ".join(["set -e", fetch, install]).replace("/run/install-rke2.sh", str(tmp_path / "install.sh"))
    said = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=_shims(tmp_path))

    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == f"type=agent version={stack.rke2.version} artifacts={ARTIFACTS}"
    cloud_init = shutil.which("cloud-init")
    if cloud_init is not None:
        (tmp_path / "user-data").write_text(build_user_data(stack.failure_domains[0], stack.rke2, TOKEN))
        checked = subprocess.run(
            [cloud_init, "schema", "--config-file", str(tmp_path / "user-data")], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_without_an_installer_mirror_both_fetch_get_rke2_io_and_set_no_artifact_url() -> None:
    stack = _stack(None)
    steps = step_commands(user_data_document(stack.failure_domains[0], stack.rke2, TOKEN)["runcmd"])
    command = rke2_upgrade_command(stack.rke2.version, installer=stack.rke2.installer)

    assert steps["fetch-installer"][1] == "curl -fsSL https://get.rke2.io -o /run/install-rke2.sh"
    assert "curl -sfL https://get.rke2.io -o /tmp/install-rke2.sh" in command
    assert not any("INSTALL_RKE2_ARTIFACT_URL" in line for line in [steps["install-rke2"][1], command])


@pytest.mark.parametrize(
    ("installer", "said"),
    [
        (
            {"script": "files.lab/install.sh"},
            "gpu-pool:rke2.installer.script: 'files.lab/install.sh' is not a download",
        ),
        ({"artifacts": "https://f.lab/r?x=1"}, "gpu-pool:rke2.installer.artifacts: 'https://f.lab/r?x=1' has a query"),
        ({"scritp": "https://f.lab/install.sh"}, "gpu-pool:rke2.installer.scritp"),
    ],
)
def test_an_installer_url_curl_could_not_use_is_refused_naming_the_key(installer: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _stack(installer)

    assert any(m.startswith(said) for m in caught.value.messages), caught.value.messages
