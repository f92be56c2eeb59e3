"""The air gap as a whole (components/air_gap.py): with `airGapped`, every URL and image a node or the cluster
fetches for the stack is served by a lab copy, or refused naming it and the key that would point it at one. Broken
through each of its keys from docs/air-gap.md's no-route-out block, which itself is accepted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.air_gap import inventory
from components.rendered_plan import render, stack_inventory
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.stack_parts import parts_of
from tests.air_gap_doc import no_route_out_block, over_prod
from tests.lab_ca import make_lab_ca

Raw = dict[str, Any]


@pytest.fixture
def doc_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Raw:
    """The page's no-route-out block over prod, where its `trustedCa` path names a CA made here."""
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "lab-ca.crt").write_text(make_lab_ca(tmp_path / "ca").pem)
    monkeypatch.chdir(tmp_path)
    return over_prod(no_route_out_block())


def _refusals(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw)
    return caught.value.messages


def test_the_docs_lab_with_no_route_out_is_served_whole_by_its_lab(doc_raw: Raw) -> None:
    stack = validate_stack(doc_raw)

    items = stack_inventory(stack)

    assert [item.reference for item in items if item.lab is None] == []
    references = [item.reference for item in items]
    assert any(ref.startswith("nvcr.io/nvidia/gpu-operator:") for ref in references)
    assert any(ref.startswith("registry.k8s.io/nfd/node-feature-discovery:") for ref in references)
    assert f"docker.io/rancher/rke2-runtime:{stack.rke2.version.replace('+', '-')}" in references
    assert stack.smoke_test.image in references
    assert {item.lab for item in items if item.key.startswith("gpu-pool:registryMirrors")} == {
        "https://harbor.lab.internal"
    }


def _drop(*path: str) -> Callable[[Raw], None]:
    def change(raw: Raw) -> None:
        node = raw
        for part in path[:-1]:
            node = node[part]
        node.pop(path[-1])

    return change


def _precompiled_without_apt_mirror(raw: Raw) -> None:
    raw.pop("aptMirror")
    raw["gpuOperator"] = {**raw["gpuOperator"], "usePrecompiled": True, "driverVersion": "580"}


BROKEN: dict[str, tuple[Callable[[Raw], None], list[str]]] = {
    # FIELD-REVIEW-6 IB-1: precompiled drivers need no packages, but every first boot installs the guest agent.
    "no apt mirror, even with precompiled drivers": (
        _precompiled_without_apt_mirror,
        [
            "gpu-pool:aptMirror.uri: with gpu-pool:airGapped, Ubuntu's archive comes from "
            "http://archive.ubuntu.com/ubuntu (every VM's first boot (qemu-guest-agent))",
            "gpu-pool:aptMirror.securityUri: with gpu-pool:airGapped, Ubuntu's security archive comes from "
            "http://security.ubuntu.com/ubuntu",
        ],
    ),
    # FIELD-REVIEW-6 W-3: the artifacts' mirror without the script's.
    "the installer's artifacts without its script": (
        _drop("rke2", "installer", "script"),
        [
            "gpu-pool:rke2.installer.script: with gpu-pool:airGapped, the RKE2 install script comes from "
            "https://get.rke2.io (every VM's first boot, the RKE2 upgrade step), which a lab with no route out cannot "
            "reach: set it to your lab's copy of install.sh (docs/air-gap.md)"
        ],
    ),
    "no installer artifacts": (
        _drop("rke2", "installer", "artifacts"),
        ["gpu-pool:rke2.installer.artifacts: with gpu-pool:airGapped, RKE2 v1.33.5+rke2r1's release files"],
    ),
    "the chart from NVIDIA's repository": (
        _drop("gpuOperator", "chartRepository"),
        [
            "gpu-pool:gpuOperator.chart: with gpu-pool:airGapped, the gpu-operator chart v26.7.0 comes from "
            "https://helm.ngc.nvidia.com/nvidia"
        ],
    ),
    "a mirror for Docker Hub alone": (
        lambda raw: raw.update(registryMirrors={"docker.io": ["https://harbor.lab.internal"]}),
        [
            "gpu-pool:registryMirrors.nvcr.io: with gpu-pool:airGapped, the nodes pull "
            "nvcr.io/nvidia/k8s/dcgm-exporter:",
            "gpu-pool:registryMirrors.registry.k8s.io: with gpu-pool:airGapped, the nodes pull "
            "registry.k8s.io/nfd/node-feature-discovery:",
        ],
    ),
    "a proxy beside it": (
        lambda raw: raw.update(proxy={"https": "http://proxy.lab.internal:3128"}),
        ["gpu-pool:airGapped: true says the lab has no route out, but gpu-pool:proxy is one"],
    ),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_what_a_lab_with_no_route_out_cannot_fetch_is_refused_naming_it_and_its_key(doc_raw: Raw, case: str) -> None:
    change, said = BROKEN[case]
    change(doc_raw)

    messages = _refusals(doc_raw)

    for start in said:
        assert any(message.startswith(start) for message in messages), (start, messages)


def test_every_gap_of_one_stack_is_refused_at_once(doc_raw: Raw) -> None:
    for case in ("the installer's artifacts without its script", "the chart from NVIDIA's repository"):
        BROKEN[case][0](doc_raw)
    doc_raw.pop("aptMirror")
    doc_raw["registryMirrors"] = {"docker.io": ["https://harbor.lab.internal"]}

    keys = {message.split(":", 2)[1] for message in _refusals(doc_raw)}

    assert keys == {
        "rke2.installer.script",
        "gpuOperator.chart",
        "aptMirror.uri",
        "aptMirror.securityUri",
        "registryMirrors.nvcr.io",
        "registryMirrors.registry.k8s.io",
    }


def test_the_tool_images_the_stack_deploys_are_in_the_air_gap_too(doc_raw: Raw) -> None:
    doc_raw["registryMirrors"] = {
        "nvcr.io": ["https://harbor.lab.internal"],
        "registry.k8s.io": ["https://harbor.lab.internal"],
    }
    doc_raw["repair"] = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}

    [docker_hub] = [m for m in _refusals(doc_raw) if m.startswith("gpu-pool:registryMirrors.docker.io:")]

    assert "docker.io/rancher/rke2-runtime:v1.33.5-rke2r1 (RKE2's runtime (and its system images))" in docker_hub
    assert "python:3.12-slim (the health check, the repair watcher and node-check)" in docker_hub


def test_a_precompiled_driver_image_is_listed_per_pinned_kernel(doc_raw: Raw) -> None:
    doc_raw["gpuOperator"] = {**doc_raw["gpuOperator"], "usePrecompiled": True, "driverVersion": "580"}
    for domain in doc_raw["failureDomains"]:
        domain["kernel"] = "6.8.0-60-generic"
        domain["sshAuthorizedKeys"] = [
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29sIHRlc3Qga2V5LCBubyBwcml2YXRlIG9u ops"
        ]
    stack = validate_stack(doc_raw)
    plan = render(parts_of(stack))

    drivers = [item.reference for item in inventory(plan.parts, plan.values) if "/driver:" in item.reference]

    assert drivers == ["nvcr.io/nvidia/driver:580-6.8.0-60-generic-ubuntu24.04"]


def test_without_airgapped_nothing_is_refused_and_the_inventory_still_says_what_is_public() -> None:
    stack = validate_stack(over_prod({}))

    public = {item.key for item in stack_inventory(stack) if item.lab is None}

    assert {"gpu-pool:rke2.installer.script", "gpu-pool:aptMirror.uri", "gpu-pool:registryMirrors.nvcr.io"} <= public
