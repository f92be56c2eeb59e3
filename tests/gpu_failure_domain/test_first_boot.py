"""docs/air-gap.md's lab with no route out, under a lab CA, boots: its rendered first boot, run as the script
cloud-init runs (tests/gpu_failure_domain/first_boot_harness.py: real curl, RKE2's real install.sh at the pinned
release and at master, TLS with a CA made here, no route out), installs RKE2 from the lab's mirror and starts the
agent. Without the CA the same servers are refused by curl and by install.sh, and the boot stops naming the step,
the URL and curl's error; a broken apt mirror costs the guest agent, not the join, and doctor names the step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.cloud_init import build_user_data
from components.gpu_failure_domain.observed import FIRST_BOOT_ANNOTATION
from components.stack_check import validate_stack
from config.stack import StackConfig
from day2.doctor.walk import diagnose
from day2.objects import Snapshot
from day2.pool import facts_of
from tests.air_gap_doc import first_boot_document, no_route_out_block, over_prod
from tests.day2.k8s_objects import dump
from tests.day2.scenarios import healthy_pool
from tests.gpu_failure_domain.first_boot_harness import Boot, release_folder, run_first_boot, unshare_works
from tests.lab_ca import LabCa, make_lab_ca

TOKEN = "K10" + "0" * 64 + "::server:test"
INSTALL_SCRIPTS = ("v1.33.5+rke2r1", "main-6ce1a80")
FILES = "files.lab.internal"
# A key's shape, as registryAuth takes one (never used to sign: cloud-init only writes it).
CLIENT_KEY = (
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHRlc3Qta2V5LW9ubHktZm9yLXNjaGVtYQ==\n-----END PRIVATE KEY-----\n"
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> LabCa:
    return make_lab_ca(tmp_path_factory.mktemp("lab-ca"))


@pytest.fixture
def namespace() -> None:
    """A boot runs in a namespace of its own (no route out): CI must have one, elsewhere its tests skip."""
    if unshare_works():
        return
    said = "this machine refuses `unshare -rmn` (a user, mount and network namespace): the first boot cannot run"
    if os.environ.get("CI"):
        pytest.fail(said)
    pytest.skip(said)


def _doc_stack(
    lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, artifacts: str | None = None
) -> StackConfig:
    """The page's no-route-out block over prod, read where its relative `trustedCa` path names the lab's CA;
    `artifacts`: the release files from another server."""
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "lab-ca.crt").write_text(lab.pem)
    monkeypatch.chdir(tmp_path)
    raw = over_prod(no_route_out_block())
    if artifacts is not None:
        raw["rke2"]["installer"]["artifacts"] = artifacts
    return validate_stack(raw)


def _served_lab(lab: LabCa, tmp_path: Path, stack: StackConfig, upstream: Path, script: str) -> Path:
    """files.lab.internal's folder: the install script where the stack's `script` says, and the release files where
    its `artifacts` say."""
    served = tmp_path / "served"
    (served / "rke2").mkdir(parents=True)
    (served / "rke2" / "install.sh").write_bytes((upstream / "rke2-install" / script / "install.sh").read_bytes())
    release_folder(served / "rke2" / "releases", stack.rke2.version)
    return served


def _boot(stack: StackConfig, tmp_path: Path, servers: dict[str, tuple[Path, Path, Path]], **kw: Any) -> Boot:
    return run_first_boot(first_boot_document(stack, TOKEN), tmp_path / "vm", servers, **kw)


@pytest.mark.parametrize("script", INSTALL_SCRIPTS)
def test_the_docs_lab_with_no_route_out_installs_rke2_from_its_https_mirror_with_its_ca_trusted(
    namespace: None, lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: Path, script: str
) -> None:
    stack = _doc_stack(lab, tmp_path, monkeypatch)
    certificate, key = lab.issue(FILES, (FILES,))
    served = _served_lab(lab, tmp_path, stack, upstream, script)

    boot = _boot(stack, tmp_path, {FILES: (served, certificate, key)})

    assert boot.returncode == 0, boot.console
    version = stack.rke2.version.replace("+", "%2B")
    fetched = [line.split()[1] for line in boot.served if line.startswith("GET")]
    assert fetched == [
        "/rke2/install.sh",
        f"/rke2/releases/{version}/sha256sum-{boot_arch()}.txt",
        f"/rke2/releases/{version}/rke2.linux-{boot_arch()}.tar.gz",
    ]
    assert (boot.prefix / "bin" / "rke2").is_file()
    assert "enable --now rke2-agent.service" in boot.systemctl
    assert [(step["step"], step["exit"]) for step in boot.steps] == [
        ("packages", 0),
        ("hold-kernel", 0),
        ("initramfs", 0),
        ("nouveau", 0),
        ("fetch-installer", 0),
        ("install-rke2", 0),
        ("guest-agent", 0),
        ("rke2-agent", 0),
    ]
    [annotate] = boot.kubectl
    assert f"annotate --overwrite node {stack.failure_domains[0].hostname} {FIRST_BOOT_ANNOTATION}=" in annotate


def test_cloud_init_itself_accepts_the_docs_lab_with_its_ca_trust_and_first_boot_runner(
    lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud_init = shutil.which("cloud-init")
    if cloud_init is None:
        pytest.skip("cloud-init is not installed (Debian's cloud-init package; .ci/run installs it)")
    stack = _doc_stack(lab, tmp_path, monkeypatch)
    auth = json.dumps({"harbor.lab.internal": {"tls": {"cert_file": lab.pem, "key_file": CLIENT_KEY}}})
    text = build_user_data(
        stack.failure_domains[0],
        stack.rke2,
        TOKEN,
        mirrors=stack.mirrors,
        registry_auth=auth,
        apt_mirror=stack.apt_mirror,
        trusted_ca=stack.trusted_ca,
    )
    (tmp_path / "user-data").write_text(text)

    checked = subprocess.run(
        [cloud_init, "schema", "--config-file", str(tmp_path / "user-data")], capture_output=True, text=True
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Valid cloud-config" in checked.stdout


def boot_arch() -> str:
    from tests.gpu_failure_domain.first_boot_harness import ARCH

    return ARCH


def test_without_the_lab_ca_curl_refuses_the_mirror_and_the_boot_stops_naming_the_step_the_url_and_why(
    namespace: None, lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: Path
) -> None:
    stack = _doc_stack(lab, tmp_path, monkeypatch)
    # The same servers under a CA the VM was never given.
    other = make_lab_ca(tmp_path / "other-ca", "other-ca")
    certificate, key = other.issue(FILES, (FILES,))
    served = _served_lab(lab, tmp_path, stack, upstream, INSTALL_SCRIPTS[0])

    boot = _boot(stack, tmp_path, {FILES: (served, certificate, key)})

    assert boot.returncode == 60, boot.console
    script = stack.rke2.installer.script
    assert f"gpu-pool first boot: STOPPED at fetch-installer ({script}): exit 60: curl: (60)" in boot.console
    failed = boot.steps[-1]
    assert (failed["step"], failed["exit"], failed["url"], failed["attempts"]) == ("fetch-installer", 60, script, 4)
    assert "SSL certificate problem" in failed["error"]
    assert "enable --now rke2-agent.service" not in boot.systemctl and boot.kubectl == []


@pytest.mark.parametrize("script", INSTALL_SCRIPTS)
def test_rke2s_install_script_refuses_a_release_server_the_lab_ca_does_not_sign(
    namespace: None, lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: Path, script: str
) -> None:
    releases = "releases.lab.internal"
    artifacts = f"https://{releases}/rke2/releases"
    stack = _doc_stack(lab, tmp_path, monkeypatch, artifacts=artifacts)
    served = _served_lab(lab, tmp_path, stack, upstream, script)
    other = make_lab_ca(tmp_path / "other-ca", "other-ca")

    boot = _boot(
        stack,
        tmp_path,
        {FILES: (served, *lab.issue(FILES, (FILES,))), releases: (served, *other.issue(releases, (releases,)))},
    )

    assert boot.returncode != 0
    failed = boot.steps[-1]
    assert (failed["step"], failed["url"]) == ("install-rke2", artifacts)
    # install.sh's own curl, at the release's first file.
    assert failed["error"].startswith("curl: (60) SSL certificate problem")
    assert f"downloading checksums at {artifacts}/" in boot.console and failed["exit"] == 60
    assert not (boot.prefix / "bin" / "rke2").exists()
    assert "enable --now rke2-agent.service" not in boot.systemctl


def test_a_broken_apt_mirror_costs_the_guest_agent_not_the_join_and_doctor_names_the_step(
    namespace: None, lab: LabCa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: Path
) -> None:
    stack = _doc_stack(lab, tmp_path, monkeypatch)
    served = _served_lab(lab, tmp_path, stack, upstream, INSTALL_SCRIPTS[0])

    boot = _boot(stack, tmp_path, {FILES: (served, *lab.issue(FILES, (FILES,)))}, apt_broken=True)

    assert boot.returncode == 0, boot.console
    assert "enable --now rke2-agent.service" in boot.systemctl
    packages = boot.steps[0]
    assert (packages["step"], packages["exit"], packages["attempts"]) == ("packages", 100, 4)
    assert "gpu-pool first boot: packages failed (exit 100), the boot goes on without it" in boot.console
    # What the boot wrote on its Node is what doctor reads there: on an otherwise healthy pool, its last floor.
    [annotate] = boot.kubectl
    record = annotate.split(f"{FIRST_BOOT_ANNOTATION}=", 1)[1]
    domain = stack.failure_domains[0]
    objects = healthy_pool()
    [node] = [o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == domain.hostname]
    node["metadata"].setdefault("annotations", {})[FIRST_BOOT_ANNOTATION] = record
    diagnosis = diagnose(Snapshot.from_items(dump(objects)["items"]), facts_of(stack, "prod"), domain.hostname)

    assert diagnosis.first_broken == "first-boot", [(f.name, f.ok, f.detail) for f in diagnosis.floors]
    [floor] = [f for f in diagnosis.floors if f.name == "first-boot"]
    assert floor.detail.startswith(
        "first boot: packages failed (exit 100, https://apt.lab.internal/ubuntu): E: Failed to fetch "
        "https://apt.lab.internal/ubuntu/dists/noble/InRelease"
    )
    assert diagnosis.fix is not None
    assert diagnosis.fix.command == f"ssh {domain.hostname} sudo cat /var/lib/gpu-pool/first-boot/packages.log"
