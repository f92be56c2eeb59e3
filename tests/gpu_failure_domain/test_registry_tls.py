"""A registry mirror under the lab's CA that asks for a client certificate: registries.yaml names, per mirror host,
the lab CA (`trustedCa`) and the client certificate and key `registryAuth` gives as PEM text, and the files it names
are the ones the stack writes, root-only. curl, given exactly those files, reaches a loopback https server that
plays the mirror (TLS with a CA made in the test); without the lab CA, or without the client certificate, it is
refused. The files turn writes the same files from its standard input."""

from __future__ import annotations

import base64
import copy
import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import user_data_document
from components.gpu_failure_domain.plan import DomainPlan, nodes_by_domain, plan_domain, plan_wave, settled_nodes_of
from components.gpu_failure_domain.registries import REGISTRY_TLS_DIR, RKE2_REGISTRIES_FILE, RKE2_TRUSTED_CA_FILE
from components.gpu_failure_domain.steps import RemoteStep
from components.stack_check import validate_stack
from config.secrets import BY_KEY
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.gpu_failure_domain.fake_vm import run_on_a_fake_vm
from tests.lab_ca import LabCa, make_lab_ca
from tests.lab_https import serving
from tests.ssh_keys import TEST_PUBLIC_KEY

TOKEN = "K10" + "0" * 64 + "::server:test"
HARBOR = "harbor.lab.internal"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> LabCa:
    return make_lab_ca(tmp_path_factory.mktemp("lab-ca"))


def _stack(lab: LabCa, port: int, keys: bool = False, lab_mirror: bool = True) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    if lab_mirror:
        raw["registryMirrors"] = {"*": [f"https://{HARBOR}:{port}"]}
        raw["trustedCa"] = lab.pem
    if keys:
        for domain in raw["failureDomains"]:
            domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    return validate_stack(raw)


def _auth(lab: LabCa, port: int) -> str:
    certificate, key = lab.issue("robot", client=True)
    tls = {"cert_file": certificate.read_text(), "key_file": key.read_text()}
    auth = {"username": "robot", "password": "p@ss"}
    return json.dumps({f"{HARBOR}:{port}": {"auth": auth, "tls": tls}})


def _materialized(document: dict[str, Any], root: Path) -> Path:
    """cloud-init's write_files under `root`, as it writes them (b64 decoded, each file's mode)."""
    for file in document["write_files"]:
        path = root / file["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        content = file["content"]
        path.write_bytes(base64.b64decode(content) if file.get("encoding") == "b64" else content.encode())
        path.chmod(int(file["permissions"], 8))
    return root


def _curl(url: str, port: int, **files: Path | None) -> subprocess.CompletedProcess[str]:
    options: list[str] = []
    for name, path in files.items():
        if path is not None:
            options += [f"--{name}", str(path)]
    return subprocess.run(
        ["curl", "-fsS", "--resolve", f"{HARBOR}:{port}:127.0.0.1", "--noproxy", "*", *options, url],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.fixture
def harbor(lab: LabCa, tmp_path: Path) -> Any:
    """The mirror: /v2/ over https, under the lab CA, asking every client for a certificate of the lab CA."""
    folder = tmp_path / "harbor"
    (folder / "v2").mkdir(parents=True)
    (folder / "v2" / "index.html").write_text("{}\n")
    certificate, key = lab.issue(HARBOR, (HARBOR,))
    with serving(folder, certificate, key, tmp_path / "harbor.log", client_ca=lab.certificate) as port:
        yield port


def test_registries_yaml_names_the_lab_ca_and_the_client_files_the_stack_writes_and_curl_reaches_the_mirror_with_them(
    lab: LabCa, tmp_path: Path, harbor: int
) -> None:
    stack, auth = _stack(lab, harbor), _auth(lab, harbor)
    document = user_data_document(
        stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.mirrors, registry_auth=auth,
        trusted_ca=stack.trusted_ca,
    )  # fmt: skip
    root = _materialized(document, tmp_path / "vm")

    registries = yaml.safe_load((root / RKE2_REGISTRIES_FILE.lstrip("/")).read_text())
    host = f"{HARBOR}:{harbor}"
    folder = f"{REGISTRY_TLS_DIR}/{HARBOR}_{harbor}"
    assert registries["mirrors"] == {"*": {"endpoint": [f"https://{host}"]}}
    assert registries["configs"][host] == {
        "auth": {"username": "robot", "password": "p@ss"},
        "tls": {
            "ca_file": RKE2_TRUSTED_CA_FILE,
            "cert_file": f"{folder}/client.pem",
            "key_file": f"{folder}/client.key",
        },
    }
    tls = {name: root / path.lstrip("/") for name, path in registries["configs"][host]["tls"].items()}
    assert stat.S_IMODE(tls["key_file"].stat().st_mode) == 0o600
    assert document["ca_certs"]["trusted"] == [stack.trusted_ca]

    url = f"https://{host}/v2/"
    reached = _curl(url, harbor, cacert=tls["ca_file"], cert=tls["cert_file"], key=tls["key_file"])
    assert reached.returncode == 0, reached.stderr
    assert reached.stdout == "{}\n"
    # Without the lab CA the server is refused; without the client certificate the server refuses.
    other = make_lab_ca(tmp_path / "other", "other-ca")
    refused = _curl(url, harbor, cacert=other.certificate, cert=tls["cert_file"], key=tls["key_file"])
    assert refused.returncode == 60, refused.stderr
    anonymous = _curl(url, harbor, cacert=tls["ca_file"])
    assert anonymous.returncode != 0


def test_the_secret_client_key_is_written_as_one_line_the_preview_masks(lab: LabCa, tmp_path: Path) -> None:
    stack, auth = _stack(lab, 5000), _auth(lab, 5000)
    document = user_data_document(
        stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.mirrors, registry_auth=auth,
        trusted_ca=stack.trusted_ca,
    )  # fmt: skip
    text = yaml.safe_dump(document)
    for part in sorted(BY_KEY["registryAuth"].written_parts(auth), key=len, reverse=True):
        text = text.replace(part, "<secret>")
    key = json.loads(auth)[f"{HARBOR}:5000"]["tls"]["key_file"]
    assert "PRIVATE KEY" not in text and base64.b64encode(key.encode()).decode() not in text
    assert "p@ss" not in text


def _turn(before: StackConfig, after: StackConfig) -> DomainPlan:
    wave = plan_wave(after, nodes_by_domain(after, settled_nodes_of(before)))
    return plan_domain(after.failure_domains[0], after, wave.turns[after.failure_domains[0].name])


def test_the_files_turn_writes_the_same_files_from_its_standard_input_and_removes_them_with_the_ca(
    lab: LabCa, tmp_path: Path
) -> None:
    before = _stack(lab, 5000, keys=True, lab_mirror=False)
    after, auth = _stack(lab, 5000, keys=True), _auth(lab, 5000)
    plan = _turn(before, after)
    step = plan.step_of("rke2-files", RemoteStep)
    render = step.command.stdin_from_registry_auth
    assert render is not None and "PRIVATE KEY" not in step.command.create

    run_on_a_fake_vm(step.command.create, tmp_path, render(auth))

    document = user_data_document(
        after.failure_domains[0], after.rke2, TOKEN, mirrors=after.mirrors, registry_auth=auth,
        trusted_ca=after.trusted_ca,
    )  # fmt: skip
    expected = _materialized(document, tmp_path / "expected")
    for path in (RKE2_REGISTRIES_FILE, RKE2_TRUSTED_CA_FILE, f"{REGISTRY_TLS_DIR}/{HARBOR}_5000/client.key"):
        written = tmp_path / path.lstrip("/")
        assert written.read_bytes() == (expected / path.lstrip("/")).read_bytes()
    assert (tmp_path / "usr/local/share/ca-certificates/gpu-pool-trusted-ca.crt").read_text() == after.trusted_ca
    assert "update-ca-certificates " in (tmp_path / "systemctl.log").read_text()

    # The mirror, its CA and its client certificate taken out: the next turn leaves none of them behind.
    back = _turn(after, before).step_of("rke2-files", RemoteStep)
    assert back.command.stdin_from_registry_auth is not None
    run_on_a_fake_vm(back.command.create, tmp_path, back.command.stdin_from_registry_auth(None))
    assert not (tmp_path / REGISTRY_TLS_DIR.lstrip("/")).exists()
    assert not (tmp_path / "usr/local/share/ca-certificates/gpu-pool-trusted-ca.crt").exists()
    assert not (tmp_path / RKE2_REGISTRIES_FILE.lstrip("/")).exists()
