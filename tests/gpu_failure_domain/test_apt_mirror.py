"""`gpu-pool:aptMirror` and `gpu-pool:airGapped`: a lab with its own Ubuntu archive gives it to every new VM's apt
(cloud-config `apt:` primary and security, checked by `cloud-init schema`) and to the GPU Operator's driver
container (`driver.repoConfig`, a ConfigMap of package sources read by apt itself here); a lab with no route out
is refused what cannot work there."""

from __future__ import annotations

import copy
import http.server
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.cloud_init import build_user_data, user_data_document
from components.gpu_failure_domain.plan import DomainPlan, nodes_by_domain, plan_domain, plan_wave, settled_nodes_of
from components.gpu_failure_domain.rollout import archive_sources, rollout_state
from components.gpu_failure_domain.steps import RemoteStep
from components.gpu_platform.apt_sources import APT_SOURCES_CONFIGMAP, APT_SOURCES_KEY, build_apt_sources_configmap
from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.stack import StackConfig
from offline.runner import read_stack_file, run_stack
from tests.day2.k8s_objects import validated
from tests.gpu_failure_domain.fake_vm import run_on_a_fake_vm, systemctl_calls
from tests.ssh_keys import TEST_PUBLIC_KEY

TOKEN = "K10" + "0" * 64 + "::server:test"
MIRROR = "http://apt.lab.internal/ubuntu"
SECURITY = "http://apt-security.lab.internal/ubuntu"


def _raw(**keys: Any) -> dict[str, Any]:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw.update(keys)
    return raw


def _stack(**keys: Any) -> StackConfig:
    return validate_stack(_raw(**keys))


def test_every_new_vms_apt_uses_the_mirror_for_the_release_and_its_security_suite(tmp_path: Path) -> None:
    stack = _stack(aptMirror={"uri": MIRROR, "securityUri": SECURITY})
    domain = stack.failure_domains[0]

    document = user_data_document(domain, stack.rke2, TOKEN, apt_mirror=stack.apt_mirror)

    assert document["apt"] == {
        "primary": [{"arches": ["default"], "uri": MIRROR}],
        "security": [{"arches": ["default"], "uri": SECURITY}],
    }
    cloud_init = shutil.which("cloud-init")
    if cloud_init is not None:
        (tmp_path / "user-data").write_text(build_user_data(domain, stack.rke2, TOKEN, apt_mirror=stack.apt_mirror))
        checked = subprocess.run(
            [cloud_init, "schema", "--config-file", str(tmp_path / "user-data")], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_driver_container_reads_its_packages_from_the_mirror_through_repo_config(tmp_path: Path) -> None:
    stack = _stack(aptMirror={"uri": MIRROR})
    assert stack.apt_mirror is not None
    configmap = validated(build_apt_sources_configmap(stack.apt_mirror, "noble", "gpu-operator"))

    # apt itself reads the file the operator mounts at /etc/apt/sources.list.d/ubuntu.sources.
    apt_get = shutil.which("apt-get")
    if apt_get is not None:
        parts, state, cache = tmp_path / "parts", tmp_path / "state", tmp_path / "cache"
        for folder in (parts, state / "lists" / "partial", cache / "archives" / "partial"):
            folder.mkdir(parents=True)
        (parts / APT_SOURCES_KEY).write_text(configmap["data"][APT_SOURCES_KEY])
        said = subprocess.run(
            [
                apt_get, "-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={parts}",
                "-o", f"Dir::State={state}", "-o", f"Dir::Cache={cache}", "-o", "Debug::NoLocking=1",
                "update", "--print-uris",
            ],
            capture_output=True, text=True,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        releases = {line.split("'")[1] for line in said.stdout.splitlines() if "InRelease" in line}
        assert releases == {
            f"{MIRROR}/dists/{suite}/InRelease" for suite in ("noble", "noble-updates", "noble-security")
        }

    values = release_values(stack.gpu_operator, stack.kyverno, stack.monitoring, repo_config=APT_SOURCES_CONFIGMAP)
    assert values["driver"]["repoConfig"] == {"configMapName": APT_SOURCES_CONFIGMAP}


def test_the_program_creates_the_sources_before_the_release_that_names_them() -> None:
    recording = run_stack("prod", config={f"gpu-pool:{k}": v for k, v in _raw(aptMirror={"uri": MIRROR}).items()})

    [configmap] = [
        r for r in recording.registrations if r.inputs.get("metadata", {}).get("name") == APT_SOURCES_CONFIGMAP
    ]
    [release] = [r for r in recording.registrations if r.type == "kubernetes:helm.sh/v3:Release"]
    assert configmap.urn in release.dependencies
    assert release.inputs["values"]["driver"]["repoConfig"] == {"configMapName": APT_SOURCES_CONFIGMAP}


def test_without_an_apt_mirror_neither_vm_nor_driver_changes() -> None:
    stack = _stack()
    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, apt_mirror=stack.apt_mirror)
    values = release_values(stack.gpu_operator, stack.kyverno, stack.monitoring)
    assert "apt" not in document and "repoConfig" not in values["driver"]


def _refusals(**keys: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _stack(**keys)
    return caught.value.messages


@pytest.mark.parametrize(
    ("mirror", "said"),
    [
        ({"uri": "apt.lab.internal/ubuntu"}, "gpu-pool:aptMirror.uri: 'apt.lab.internal/ubuntu' is not an archive"),
        ({"securityUri": MIRROR}, "gpu-pool:aptMirror.uri"),
    ],
)
def test_an_apt_mirror_apt_could_not_use_is_refused_naming_the_key(mirror: dict[str, str], said: str) -> None:
    assert any(m.startswith(said) for m in _refusals(aptMirror=mirror))


# ------------------------------------------------------------------------------ an apt mirror on VMs that exist


def _keyed(**keys: Any) -> StackConfig:
    raw = _raw(**keys)
    for domain in raw["failureDomains"]:
        domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    return validate_stack(raw)


def _turn(before: StackConfig, after: StackConfig) -> DomainPlan:
    wave = plan_wave(after, nodes_by_domain(after, settled_nodes_of(before)))
    return plan_domain(after.failure_domains[0], after, wave.turns[after.failure_domains[0].name])


def _apt_reads(root: Path, tmp_path: Path) -> set[str]:
    """The release indexes apt itself would fetch with the sources under `root`/etc/apt (nothing is fetched)."""
    state, cache = tmp_path / "apt-state", tmp_path / "apt-cache"
    for folder in (state / "lists" / "partial", cache / "archives" / "partial"):
        folder.mkdir(parents=True, exist_ok=True)
    said = subprocess.run(
        [
            "apt-get", "-o", f"Dir::Etc::SourceList={root}/etc/apt/sources.list",
            "-o", f"Dir::Etc::SourceParts={root}/etc/apt/sources.list.d", "-o", f"Dir::State={state}",
            "-o", f"Dir::Cache={cache}", "-o", "Debug::NoLocking=1", "update", "--print-uris",
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    return {line.split("'")[1] for line in said.stdout.splitlines() if "InRelease" in line}


needs_apt = pytest.mark.skipif(shutil.which("apt-get") is None, reason="apt itself reads the written sources")


@needs_apt
@pytest.mark.parametrize(
    ("image", "release", "sources"),
    [
        ("local:import/noble-server-cloudimg-amd64.qcow2", "noble", "etc/apt/sources.list.d/ubuntu.sources"),
        ("local:import/jammy-server-cloudimg-amd64.qcow2", "jammy", "etc/apt/sources.list"),
    ],
)
def test_an_apt_mirror_added_to_existing_vms_is_a_files_turn_after_which_apt_reads_the_release_from_it(
    tmp_path: Path, image: str, release: str, sources: str
) -> None:
    proxmox = {**_raw()["proxmox"], "cloudImage": image}
    before = _keyed(proxmox=proxmox)
    after = _keyed(proxmox=proxmox, aptMirror={"uri": MIRROR, "securityUri": SECURITY})
    root = tmp_path / "vm"
    # The VM as a first boot without a mirror left it: Ubuntu's archive.
    (root / sources).parent.mkdir(parents=True)
    (root / sources).write_text(archive_sources(before)["content"])
    assert _apt_reads(root, tmp_path) == {
        f"http://{host}.ubuntu.com/ubuntu/dists/{suite}/InRelease"
        for host, suite in [
            ("archive", release),
            ("archive", f"{release}-updates"),
            ("archive", f"{release}-backports"),
            ("security", f"{release}-security"),
        ]
    }

    plan = _turn(before, after)

    assert plan.turn.kind == "roll" and plan.turn.changes == ("driver-template", "files")
    step = plan.step_of("rke2-files", RemoteStep)
    run_on_a_fake_vm(step.command.create, root)
    assert systemctl_calls(root) == ["restart rke2-agent"]
    assert oct((root / sources).stat().st_mode & 0o777) == "0o644"
    assert _apt_reads(root, tmp_path) == {
        f"{MIRROR}/dists/{release}/InRelease",
        f"{MIRROR}/dists/{release}-updates/InRelease",
        f"{MIRROR}/dists/{release}-backports/InRelease",
        f"{SECURITY}/dists/{release}-security/InRelease",
    }
    # The node records the mirror, so the next preview plans nothing more.
    assert rollout_state(after.failure_domains[0], after)["files"] != rollout_state(
        before.failure_domains[0], before
    ).get("files")
    assert not plan_wave(after, nodes_by_domain(after, settled_nodes_of(after))).changes


@needs_apt
def test_an_apt_mirror_taken_out_of_the_stack_gives_the_vm_ubuntus_archive_back_never_no_sources(
    tmp_path: Path,
) -> None:
    before, after = _keyed(aptMirror={"uri": MIRROR}), _keyed()
    root = tmp_path / "vm"
    sources = root / "etc/apt/sources.list.d/ubuntu.sources"
    sources.parent.mkdir(parents=True)
    sources.write_text(archive_sources(before)["content"].replace("http://archive.ubuntu.com/ubuntu", MIRROR))

    plan = _turn(before, after)

    assert plan.turn.changes == ("driver-template", "files")
    run_on_a_fake_vm(plan.step_of("rke2-files", RemoteStep).command.create, root)
    assert not any(MIRROR in uri for uri in _apt_reads(root, tmp_path))
    assert "http://archive.ubuntu.com/ubuntu/dists/noble/InRelease" in _apt_reads(root, tmp_path)
    # Nothing is proven of Ubuntu's own archive before the drain: the login step is a login.
    assert "apt-get" not in plan.step_of("rke2-login", RemoteStep).command.create


def test_a_files_turn_without_a_mirror_leaves_a_sources_file_written_by_hand_alone(tmp_path: Path) -> None:
    # A proxy added: a files turn, no mirror in the stack. Only a file gpu-pool or cloud-init wrote is replaced by
    # Ubuntu's archive; one a person wrote (no generated header) keeps its lines.
    before, after = _keyed(), _keyed(proxy={"https": "http://proxy.lab.internal:3128"})
    root = tmp_path / "vm"
    sources = root / "etc/apt/sources.list.d/ubuntu.sources"
    sources.parent.mkdir(parents=True)
    by_hand = "Types: deb\nURIs: http://apt.own.lab/ubuntu\nSuites: noble\nComponents: main\n"
    sources.write_text(by_hand)

    step = _turn(before, after).step_of("rke2-files", RemoteStep)
    said = run_on_a_fake_vm(step.command.create, root)

    assert sources.read_text() == by_hand
    assert "ubuntu.sources was written by hand: left as it is" in said.stdout
    # cloud-init's own file (its first-boot header) is the VM's as created: replaced by what a new VM gets.
    sources.write_text("## Note, this file is written by cloud-init on first boot of an instance\n" + by_hand)
    run_on_a_fake_vm(step.command.create, root)
    assert sources.read_text() == archive_sources(after)["content"]


@needs_apt
def test_a_mirror_apt_cannot_read_the_release_from_stops_the_turn_before_the_drain_naming_it(tmp_path: Path) -> None:
    """The login step, before the drain, has apt fetch the release's signed indexes from the new sources; a mirror
    that lacks the release (here a loopback server answering 404) fails it with apt's own words and the key."""

    class Missing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Missing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mirror = f"http://127.0.0.1:{server.server_address[1]}/ubuntu"
        plan = _turn(_keyed(), _keyed(aptMirror={"uri": mirror}))
        login = plan.step_of("rke2-login", RemoteStep)
        assert "wave-drain" not in login.waits_for
        assert "rke2-login" in plan.step("wave-drain").waits_for

        said = run_on_a_fake_vm(login.command.create, tmp_path, check=False)
    finally:
        server.shutdown()
    assert said.returncode != 0
    assert f"gpu-pool: apt on this VM cannot read the release from gpu-pool:aptMirror ({mirror})" in said.stderr
    assert "nothing was drained" in said.stderr
    assert f"E: The repository '{mirror} noble Release' does not have a Release file." in said.stderr
    assert "unsandboxed" not in said.stderr


def test_a_changed_apt_mirror_on_a_domain_without_an_ssh_key_is_refused_naming_the_key() -> None:
    before, after = _stack(), _stack(aptMirror={"uri": MIRROR})
    problems = plan_wave(after, nodes_by_domain(after, settled_nodes_of(before))).problems
    assert [p.split(":", 2)[1] for p in problems] == ["failureDomains[dc1].sshAuthorizedKeys"], problems
    assert "gpu-pool:aptMirror" in problems[0]
