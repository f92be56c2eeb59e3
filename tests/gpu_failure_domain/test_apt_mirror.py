"""`gpu-pool:aptMirror` and `gpu-pool:airGapped`: a lab with its own Ubuntu archive gives it to every new VM's apt
(cloud-config `apt:` primary and security, checked by `cloud-init schema`) and to the GPU Operator's driver
container (`driver.repoConfig`, a ConfigMap of package sources read by apt itself here); a lab with no route out
is refused what cannot work there."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.cloud_init import build_user_data, user_data_document
from components.gpu_platform.apt_sources import APT_SOURCES_CONFIGMAP, APT_SOURCES_KEY, build_apt_sources_configmap
from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.stack import StackConfig
from offline.runner import read_stack_file, run_stack
from tests.day2.k8s_objects import validated

TOKEN = "K10" + "0" * 64 + "::server:test"
MIRROR = "http://apt.lab.internal/ubuntu"
SECURITY = "http://apt-security.lab.internal/ubuntu"
INSTALLER = {"script": "https://files.lab.internal/install.sh", "artifacts": "https://files.lab.internal/rke2"}


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


def test_a_lab_with_no_route_out_and_no_apt_mirror_must_use_precompiled_drivers() -> None:
    messages = _refusals(airGapped=True, rke2={**_raw()["rke2"], "installer": INSTALLER})

    assert messages == [
        "gpu-pool:aptMirror: with gpu-pool:airGapped the driver container cannot download the kernel headers it "
        "builds nvidia.ko against; set gpu-pool:aptMirror (an Ubuntu archive mirror, written to driver.repoConfig) "
        "or gpu-pool:gpuOperator.usePrecompiled: true (precompiled driver images need no packages)"
    ]
    # Either way out is accepted.
    _stack(airGapped=True, aptMirror={"uri": MIRROR}, rke2={**_raw()["rke2"], "installer": INSTALLER})


def test_no_route_out_names_every_missing_mirror_at_once_and_a_proxy_is_a_route_out() -> None:
    messages = _refusals(airGapped=True)
    assert [m.split(":", 2)[1] for m in messages] == ["aptMirror", "rke2.installer"]

    [proxied] = _refusals(airGapped=True, proxy={"https": "http://proxy.lab:3128"})
    assert proxied.startswith("gpu-pool:airGapped: true says the lab has no route out, but gpu-pool:proxy is one")


@pytest.mark.parametrize(
    ("mirror", "said"),
    [
        ({"uri": "apt.lab.internal/ubuntu"}, "gpu-pool:aptMirror.uri: 'apt.lab.internal/ubuntu' is not an archive"),
        ({"securityUri": MIRROR}, "gpu-pool:aptMirror.uri"),
    ],
)
def test_an_apt_mirror_apt_could_not_use_is_refused_naming_the_key(mirror: dict[str, str], said: str) -> None:
    assert any(m.startswith(said) for m in _refusals(aptMirror=mirror))
