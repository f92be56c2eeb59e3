"""The live preflight reads each node's storage through the Proxmox API (the provider's getDatastores, pve-storage's
`GET /nodes/{node}/storage`): a snippets datastore without the snippets content type, a disk datastore without
images, a cloud image on a datastore without import, or a datastore the token cannot see, are refused at preview
naming the key, the node and the `pvesm` command that fixes it, instead of failing the snippet upload or the disk
import during `up`."""

from __future__ import annotations

from typing import Any

import pytest

from components.gpu_failure_domain.host_preflight import datastore_needs, datastore_problems, run_preflight
from components.shared.preflight import PreflightError
from components.stack_check import validate_stack
from config.stack import StackConfig
from offline.runner import execute, install_mocks, read_stack_file
from tests.proxmox_hardware import answering, datastore, pve_storage


def _prod() -> StackConfig:
    return validate_stack({k.removeprefix("gpu-pool:"): v for k, v in read_stack_file("prod").items()})


def _preflight(storage: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, str]:
    cfg = _prod()
    install_mocks("test", invoke=answering(storage=storage))
    report: dict[str, str] = {}

    def program() -> None:
        report.update(
            run_preflight(
                cfg.failure_domains,
                enabled=True,
                host_check=False,
                ssh_user="root",
                node_addresses={},
                provider=None,
                offline=False,
                datastores=datastore_needs(cfg.proxmox),
            )
        )

    execute(program)
    return report


def _refused(storage: dict[str, list[dict[str, Any]]]) -> str:
    with pytest.raises(PreflightError) as raised:
        _preflight(storage)
    return "\n".join(raised.value.messages)


def test_a_default_install_with_snippets_and_import_on_passes() -> None:
    assert set(_preflight()) == {"dc1", "dc2", "dc3"}


def test_a_snippets_datastore_without_the_snippets_content_type_is_refused_with_the_pvesm_command() -> None:
    no_snippets = [datastore("local", "dir", "backup,import,iso,vztmpl"), pve_storage()[1]]

    message = _refused({"pve-dc2": no_snippets})

    assert (
        "gpu-pool:proxmox.snippetsDatastore: datastore 'local' on node pve-dc2 has the content types "
        "backup,import,iso,vztmpl, not snippets, which the cloud-init user data needs: "
        "pvesm set local --content backup,import,iso,snippets,vztmpl"
    ) in message
    assert "pve-dc1" not in message


def test_a_cloud_image_on_a_datastore_without_import_is_refused() -> None:
    message = _refused({"pve-dc1": [datastore("local", "dir", "iso,snippets,vztmpl"), pve_storage()[1]]})

    assert "gpu-pool:proxmox.cloudImage: datastore 'local' on node pve-dc1 has the content types iso,sni" in message
    assert "not import, which the cloud image the disk is made from needs" in message


def test_a_disk_datastore_the_token_cannot_see_is_refused_naming_what_it_can_see() -> None:
    message = _refused({"pve-dc3": [pve_storage()[0]]})

    assert "gpu-pool:proxmox.diskDatastore: node pve-dc3 has no datastore 'local-lvm'" in message
    assert "(its datastores: local)" in message and "Datastore.Audit on /storage/local-lvm" in message


def test_a_disabled_datastore_is_refused() -> None:
    stores = [pve_storage()[0], datastore("local-lvm", "lvmthin", "images,rootdir", enabled=False)]

    assert "datastore 'local-lvm' is disabled or not active on node pve-dc1" in _refused({"pve-dc1": stores})


def test_every_node_is_asked_once() -> None:
    asked: list[str] = []
    inner = answering()

    def invoke(args: Any) -> dict[str, Any]:
        if args.token.endswith("getDatastores"):
            asked.append(args.args["nodeName"])
        return inner(args)

    cfg = _prod()
    install_mocks("test", invoke=invoke)
    execute(
        lambda: run_preflight(
            [*cfg.failure_domains, cfg.failure_domains[0]],
            enabled=True,
            host_check=False,
            ssh_user="root",
            node_addresses={},
            provider=None,
            offline=False,
            datastores=datastore_needs(cfg.proxmox),
        )
    )
    assert asked == ["pve-dc1", "pve-dc2", "pve-dc3"]


def test_the_api_answers_raw_shape_is_read_too() -> None:
    """pve-storage's own field names (storage, content as a comma list), as the e2e stand-in answers them."""
    answer = [{"storage": "local", "type": "dir", "content": "iso,vztmpl", "enabled": 1, "active": 1}]

    problems = datastore_problems("pve-dc1", datastore_needs(_prod().proxmox)[:1], answer)

    assert problems and "has the content types iso,vztmpl, not snippets" in problems[0]


def test_no_datastores_asked_means_no_storage_invoke() -> None:
    assert set(_preflight_without_needs()) == {"dc1", "dc2", "dc3"}


def _preflight_without_needs() -> dict[str, str]:
    cfg = _prod()

    def invoke(args: Any) -> dict[str, Any]:
        assert not args.token.endswith("getDatastores")
        return answering()(args)

    install_mocks("test", invoke=invoke)
    report: dict[str, str] = {}
    execute(
        lambda: report.update(
            run_preflight(
                cfg.failure_domains,
                enabled=True,
                host_check=False,
                ssh_user="root",
                node_addresses={},
                provider=None,
                offline=False,
            )
        )
    )
    return report


def test_the_e2e_proxmox_stand_in_answers_the_storage_index_in_the_shape_the_preflight_reads(tmp_path) -> None:
    """The loopback stand-in the engine tier runs against (tests/e2e/proxmox_api.py) answers pve-storage's
    index the way a default install with snippets and import on would: the preflight passes on it, and a
    `content` filter leaves out what does not allow that type, as storage_info does."""
    from tests.e2e.proxmox_api import ProxmoxState

    state = ProxmoxState({"pve-dc1": []}, tmp_path)
    answer = state.handle("GET", "/nodes/pve-dc1/storage", {})

    assert datastore_problems("pve-dc1", datastore_needs(_prod().proxmox), answer) == []
    assert [d["storage"] for d in state.handle("GET", "/nodes/pve-dc1/storage", {"content": ["images"]})] == [
        "local-lvm"
    ]
