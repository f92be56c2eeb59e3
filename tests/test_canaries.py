"""No credential leaves Pulumi's secret model (issue 50): a distinct canary in every entry of config/secrets.py's
CREDENTIALS at once, every offline command of the README and docs/day2.md run with them the way a person would (make
preview, make diff, make claims and doctor, gpu-pool discover, node-check and repair in a dry run), and every byte
they print or write searched for each canary, raw, percent-encoded, JSON-escaped and base64-encoded. Offline, no
place is allowed: the preview writes a marker where the snippet holds a secret. A canary found fails the test,
naming the command, the stream or file, and the credential.

The deployed half (the engine's state, the cluster's objects, the VM's files) is tests/e2e/test_canaries_deployed.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from benchmarks.settings import ROOT, without_make_variables
from config.secrets import BY_KEY, CREDENTIALS, PROMETHEUS_PASSWORD_ENV, PROMETHEUS_TOKEN_ENV, SECRETS
from tests.ssh_keys import TEST_PUBLIC_KEY

HEX = "0123456789abcdef" * 4
# One canary per credential (and per way of giving it), each a text found nowhere else.
RKE2_ENV = f"K10{HEX}::server:canary-rke2-env-7f31"
RKE2_FLAG = f"K10{HEX}::server:canary-rke2-flag-52ad"
CANARIES: dict[str, str] = {
    "gpu-pool:proxmoxApiToken": "canary@pve!gpu-pool=c0ffee00-0000-4000-8000-0000000000a1",
    "gpu-pool:proxmoxRootPassword": "canary-root-pw-19c4",
    "gpu-pool:rke2Token (environment)": RKE2_ENV,
    "gpu-pool:rke2Token (--secret)": RKE2_FLAG,
    "gpu-pool:sshPrivateKey": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\ncanary-ssh-key-b77e\n-----END OPENSSH PRIVATE KEY-----"
    ),
    "gpu-pool:registryAuth password": "canary-registry-pw-0e4d",
    "gpu-pool:registryAuth tls key_file": "canary-registry-key-d1a9",
    # A `#`, a `@` and a `/`: the characters that broke a URL's parsing and made a refusal print it.
    "gpu-pool:proxyAuth": "canary-proxy-pw#4@2/c",
    "gpu-pool:prometheusAuth": "canary-prom-policy-pw-8b0f",
    "claims --prometheus-password": "canary-prom-flag-pw-33ce",
    "GPU_POOL_PROMETHEUS_PASSWORD": "canary-prom-env-pw-a7d2",
    "GPU_POOL_PROMETHEUS_TOKEN": "canary-prom-token-5e61",
    "a login in --prometheus": "canary-prom-url-pw#e2",
    # In plain config: once as a URL parses (accepted, it would be written everywhere), once with the `#` that made
    # the refusal of an unparsable URL quote it.
    "a login in gpu-pool:proxy.https": "canary-proxy-url-pw-9d",
    "a login with a # in gpu-pool:proxy.http": "canary-proxy-url-pw#4e",
    "a login in gpu-pool:aptMirror.uri": "canary-apt-url-pw-61f0",
    "a password in gpuOperator.extraValues": "canary-extra-values-pw-c3b8",
}
# What each credential of the list is planted as (the unattended token is the stack's own: none to plant).
PLANTED_FOR = {
    "gpu-pool:proxmoxApiToken": ["gpu-pool:proxmoxApiToken"],
    "gpu-pool:proxmoxRootPassword": ["gpu-pool:proxmoxRootPassword"],
    "gpu-pool:rke2Token": ["gpu-pool:rke2Token (environment)", "gpu-pool:rke2Token (--secret)"],
    "gpu-pool:sshPrivateKey": ["gpu-pool:sshPrivateKey"],
    "gpu-pool:registryAuth": ["gpu-pool:registryAuth password", "gpu-pool:registryAuth tls key_file"],
    "gpu-pool:proxyAuth": [
        "gpu-pool:proxyAuth",
        "a login in gpu-pool:proxy.https",
        "a login with a # in gpu-pool:proxy.http",
    ],
    "gpu-pool:prometheusAuth": ["gpu-pool:prometheusAuth"],
    "the unattended repair's Proxmox token": [],
    "Prometheus' login for gpu-pool claims": [
        "claims --prometheus-password",
        "GPU_POOL_PROMETHEUS_PASSWORD",
        "GPU_POOL_PROMETHEUS_TOKEN",
        "a login in --prometheus",
    ],
    "a login in an apt mirror's URL": ["a login in gpu-pool:aptMirror.uri"],
    "a password in the chart's extra values": ["a password in gpuOperator.extraValues"],
}
MIRROR = "mirror.lab.internal:5000"
NODE = "rke2-worker-dc2-gpu-a"
NOW = "2026-05-04T10:00:00Z"


def _forms(canary: str) -> set[str]:
    """The canary as a file or a message could hold it: raw, percent-encoded (a URL's login), JSON-escaped, and
    base64 at each of the three alignments (cloud-init's b64 files, a Basic header), edges trimmed."""
    forms = {canary, quote(canary, safe=""), json.dumps(canary)[1:-1]}
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + canary.encode()).decode()
        start = (pad * 4 + 2) // 3
        forms.add(encoded[start : len(encoded) - 4])
    # And its distinctive core alone: a URL cut at the `#` of its password, a PEM re-wrapped, still leak it.
    cores = {run for run in re.findall(r"[A-Za-z0-9_-]{12,}", canary) if "canary" in run or "c0ffee" in run}
    return {form for form in forms if len(form) >= 12} | cores


FORMS = {name: _forms(value) for name, value in CANARIES.items()}


def _secret_env() -> dict[str, str]:
    registry = {
        MIRROR: {
            "auth": {"username": "robot", "password": CANARIES["gpu-pool:registryAuth password"]},
            "tls": {
                "cert_file": "/etc/rancher/rke2/mirror-client.crt",
                "key_file": "-----BEGIN PRIVATE KEY-----\n"
                + CANARIES["gpu-pool:registryAuth tls key_file"]
                + "\n-----END PRIVATE KEY-----\n",
            },
        }
    }
    values = {
        "proxmoxApiToken": CANARIES["gpu-pool:proxmoxApiToken"],
        "proxmoxRootPassword": CANARIES["gpu-pool:proxmoxRootPassword"],
        "rke2Token": RKE2_ENV,
        "sshPrivateKey": CANARIES["gpu-pool:sshPrivateKey"] + "\n",
        "registryAuth": json.dumps(registry),
        "proxyAuth": "svc-gpu:" + CANARIES["gpu-pool:proxyAuth"],
        "prometheusAuth": "admin:" + CANARIES["gpu-pool:prometheusAuth"],
    }
    assert set(values) == {secret.key for secret in SECRETS}, "a stack secret of config/secrets.py is not planted"
    return {
        **{BY_KEY[key].source_env: value for key, value in values.items()},
        PROMETHEUS_PASSWORD_ENV: CANARIES["GPU_POOL_PROMETHEUS_PASSWORD"],
        PROMETHEUS_TOKEN_ENV: CANARIES["GPU_POOL_PROMETHEUS_TOKEN"],
    }


def _stack(config: Mapping[str, object]) -> dict[str, Any]:
    stack = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    stack["config"].update(config)
    # A key on every VM: the files turn make diff plans for the proxy logs in with it.
    for domain in stack["config"]["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    return dict(stack)


PROXY = "http://proxy.lab.internal:3128"
# Every key that takes a credential, set so that it does: the proxy's login, registry auth on a mirror, the reclaim
# policy reading Prometheus.
ACCEPTED = {
    "gpu-pool:proxy": {"http": PROXY, "https": PROXY, "login": True, "noProxy": [".lab.internal"]},
    "gpu-pool:registryMirrors": {"docker.io": [f"http://{MIRROR}"]},
    "gpu-pool:reclaim": {"idleNotebooks": {"enabled": True, "prometheusUrl": "http://prometheus.lab.internal:9090"}},
}
# Credentials where plain config refuses them: each refusal must name the key and not the value.
PROXY_LOGIN = f"http://svc-gpu:{CANARIES['a login in gpu-pool:proxy.https']}@proxy.lab:3128"
PROXY_HASH_LOGIN = f"http://svc-gpu:{CANARIES['a login with a # in gpu-pool:proxy.http']}@proxy.lab:3128"
APT_LOGIN = f"http://apt:{CANARIES['a login in gpu-pool:aptMirror.uri']}@apt.lab.internal/ubuntu"
EXTRA_VALUES = {"driver": {"repoConfig": {"password": CANARIES["a password in gpuOperator.extraValues"]}}}
# Each alone in a stack of its own: were one accepted, nothing else would stop the preview from writing it out.
REFUSED: dict[str, dict[str, Any]] = {
    "proxy": {"gpu-pool:proxy": {"https": PROXY_LOGIN}},
    "proxy-hash": {"gpu-pool:proxy": {"http": PROXY_HASH_LOGIN, "https": PROXY}},
    "apt-mirror": {"gpu-pool:aptMirror": {"uri": APT_LOGIN}},
    "extra-values": {"gpu-pool:gpuOperator": {"extraValues": EXTRA_VALUES}},
}


def _closed_port() -> int:
    """A loopback port nothing listens on: a Prometheus that cannot be reached, so the error path is what runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass(frozen=True)
class Ran:
    name: str
    output: str


@dataclass
class World:
    ran: list[Ran]
    written: list[Path]


def _run(name: str, argv: list[str], env: Mapping[str, str]) -> Ran:
    done = subprocess.run(
        argv,
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    return Ran(name, f"[exit {done.returncode}]\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")


def _make(*args: str) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not on PATH")
    return [make, "--no-print-directory", *args]


def _gpu_pool(*args: str) -> list[str]:
    return [sys.executable, "-m", "day2.cli", *args]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Every offline command run once with every canary planted; what they printed and wrote."""
    tmp = tmp_path_factory.mktemp("canaries")
    stacks, before = tmp / "stacks", tmp / "before"
    folders = {stacks: ACCEPTED, before: {}, **{tmp / name: config for name, config in REFUSED.items()}}
    for folder, config in folders.items():
        folder.mkdir()
        shutil.copy(ROOT / "Pulumi.yaml", folder / "Pulumi.yaml")
        (folder / "Pulumi.canary.yaml").write_text(yaml.safe_dump(_stack(config)), encoding="utf-8")
    env = {**without_make_variables(dict(os.environ)), **_secret_env()}
    prometheus = f"http://127.0.0.1:{_closed_port()}"
    with_login = prometheus.replace("http://", f"http://admin:{CANARIES['a login in --prometheus']}@")
    flag_secret = f"--secret rke2Token={RKE2_FLAG}"
    out = {name: tmp / "out" / name for name in ("preview", "diff", *REFUSED)}
    commands = {
        "make preview": _make(
            "preview", "STACK=canary", f"OUT={out['preview']}", f"ARGS=--stack-dir {stacks} {flag_secret}"
        ),
        "make diff": _make(
            "diff",
            "STACK=canary",
            f"BEFORE={before / 'Pulumi.canary.yaml'}",
            f"AFTER={stacks / 'Pulumi.canary.yaml'}",
            f"OUT={out['diff']}",
        ),
        "make diff with --secret": _make(
            "diff",
            "STACK=canary",
            f"BEFORE={before / 'Pulumi.canary.yaml'}",
            f"OUT={out['diff']}",
            f"ARGS={flag_secret}",
        ),
        **{
            f"make preview refusing {name}": _make(
                "preview", "STACK=canary", f"OUT={out[name]}", f"ARGS=--stack-dir {tmp / name}"
            )
            for name in REFUSED
        },
        "make claims with --secret": _make("claims", f"ARGS=--from examples/day2/notebooks.json {flag_secret}"),
        "make claims --usage with a login in --prometheus": _make(
            "claims", f"ARGS=--usage --from examples/day2/notebooks.json --now {NOW} --prometheus {with_login}"
        ),
        "make claims --usage with --prometheus-password": _make(
            "claims",
            f"ARGS=--usage --from examples/day2/notebooks.json --now {NOW} --prometheus {prometheus} "
            f"--prometheus-user admin --prometheus-password {CANARIES['claims --prometheus-password']}",
        ),
        "make claims idle flags, password from the environment": _make(
            "claims",
            f"ARGS=--from examples/day2/notebooks.json --now {NOW} --prometheus {prometheus} --prometheus-user admin",
        ),
        "gpu-pool claims --reclaimable, token from the environment": _gpu_pool(
            "claims", "--reclaimable", "--from", "examples/day2/notebooks.json", "--now", NOW,
            "--prometheus", prometheus, "--stack", "canary", "--stack-dir", str(stacks),
        ),
        "make doctor": _make("doctor", f"ARGS={NODE} --from examples/day2/broken-driver.json"),
        "gpu-pool discover": _gpu_pool(
            "discover", "--from", "examples/discover/pve-a-hardware-pci.json", "--node", "pve-a"
        ),
        "gpu-pool node-check": _gpu_pool(
            "node-check", "--sysfs-root", "tests/fixtures/node_check/h200/sys",
            "--proc-root", "tests/fixtures/node_check/h200/proc", "--run-root", "tests/fixtures/node_check/h200",
            "--kernel-log", "tests/fixtures/node_check/h200/dmesg.txt",
            "--nvml-json", "tests/fixtures/node_check/h200/nvml.json", "--expect-id", "10de:2335", "--node", "h200-vm",
        ),
        "gpu-pool repair (dry run)": _gpu_pool(
            "repair", NODE, "--stack", "h200-lab", "--stack-dir", "examples/day2",
            "--from", "examples/day2/h200-lab.json", "--node-check", "examples/day2/node-check-dc2-xid79.json",
            "--now", NOW,
        ),
    }  # fmt: skip
    ran = [_run(name, argv, env) for name, argv in commands.items()]
    written = sorted(path for path in (tmp / "out").rglob("*") if path.is_file())
    yield World(ran, written)


def _found(text: str) -> list[str]:
    return sorted(name for name, forms in FORMS.items() if any(form in text for form in forms))


def test_every_credential_of_the_list_has_a_canary_planted() -> None:
    assert set(PLANTED_FOR) == {row.name for row in CREDENTIALS}
    assert {canary for names in PLANTED_FOR.values() for canary in names} == set(CANARIES)


def test_the_commands_ran_as_the_readme_and_day2_docs_show_them(world: World) -> None:
    said = {ran.name: ran.output for ran in world.ran}

    # The accepted stack previews and diffs with every credential set (the canaries are real inputs, not ignored).
    assert said["make preview"].startswith("[exit 0]"), said["make preview"][-3000:]
    assert said["make diff"].startswith("[exit 0]"), said["make diff"][-3000:]
    assert "<secret gpu-pool:proxyAuth>" in (world_file(world, "preview/cloud-init"))
    assert "gpu-pool:proxy.https: carries a login" in said["make preview refusing proxy"]
    assert "gpu-pool:proxy.http: carries a login" in said["make preview refusing proxy-hash"]
    assert "gpu-pool:aptMirror.uri: carries a login" in said["make preview refusing apt-mirror"]
    assert "'driver.repoConfig.password' holds a credential" in said["make preview refusing extra-values"]
    for name in ("make diff with --secret", "make claims with --secret"):
        assert "unrecognized arguments: --secret <value not shown>" in said[name], said[name]
    assert "cannot reach it" in said["make claims --usage with a login in --prometheus"]
    assert said["gpu-pool node-check"].startswith("[exit 0]"), said["gpu-pool node-check"]


def world_file(world: World, under: str) -> str:
    return "".join(path.read_text(errors="replace") for path in world.written if under in path.as_posix())


def test_no_canary_is_in_what_any_command_printed(world: World) -> None:
    leaks = {ran.name: _found(ran.output) for ran in world.ran}

    assert {name: found for name, found in leaks.items() if found} == {}


def test_no_canary_is_in_any_file_the_commands_wrote(world: World) -> None:
    assert world.written, "the commands wrote nothing to search"
    leaks = {
        path.as_posix().split("/out/", 1)[1]: _found(path.read_bytes().decode("utf-8", "replace"))
        for path in world.written
    }

    assert {name: found for name, found in leaks.items() if found} == {}


def test_docs_secrets_says_how_to_give_each_credential_and_where_it_is_in_clear() -> None:
    page = (ROOT / "docs" / "secrets.md").read_text(encoding="utf-8")

    missing = [row.name for row in CREDENTIALS if f"| `{row.name}` |" not in page and f"| {row.name} |" not in page]
    assert missing == []
