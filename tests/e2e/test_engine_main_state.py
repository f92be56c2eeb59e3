"""Upgrading a running stack from main (MAIN, before issue 48's node/) to this tree: the one-time change.

The node-steps script is now node/ packed with its driver (components/gpu_failure_domain/node_steps.py), so every
persistent step that runs it (each domain's power-cycle, node-ready, gpu-ready, and its rollout record, which was
a shell command and is now the script's `rollout` step) has a new `create`, and pulumi-command runs `create` on an
update: the first `up` after the upgrade runs them once more. Each finds nothing to do: nothing is pending in
Proxmox (no power cycle), the node is Ready, its slots are advertised on the pinned driver, and the record it
writes is the one the Node carries with the driver template's digest added (issue 47 item 4: main recorded the
driver version only, and no domain gets a turn for it; nothing uncordoned, nothing cordoned). Then nothing is left
to change.

On the shared `deployed` stack (tests/e2e/engine_deployed.py): its project is linked to main's program (`git
archive` of MAIN, the program's entries only), `pulumi up` runs it, so every resource in the state is as main
registers it; then the project is linked back to this tree: the preview (`pulumi preview --diff`, what the
closing note of issue 48 shows) updates exactly those steps, its `up` changes nothing on the cluster or in
Proxmox, and the next preview is all `same`. The project is this tree's again after.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.rollout import DRIVER_TEMPLATE_KEY
from components.gpu_platform.driver_template import stack_driver_template
from components.stack_check import validate_stack
from node.vocabulary import ROLLOUT_ANNOTATION, TURN_STATE_LABEL
from offline.runner import PROJECT, ROOT_DIR
from tests.e2e.engine import PROGRAM_ENTRIES, PulumiStack
from tests.e2e.engine_deployed import Deployed, changed, last_update, preview

# main when issue 48's node/ was merged into it (the main it was built on): the state a user's stack holds before.
MAIN = "bfb6866"
DOMAINS = ("dc1", "dc2", "dc3")
# The persistent steps that run the node-steps script: updated once, each finding nothing to do.
ONE_TIME = {f"{d}-{step}": "update" for d in DOMAINS for step in ("power-cycle", "node-ready", "gpu-ready", "rollout")}
# The alert rules gain the per-card recording rules the notebook reclaim reads (issue 51: gpu-pool.cards) and its
# two alerts: one update of the PrometheusRule, nothing restarted.
ONE_TIME["gpu-platform-alert-rules"] = "update"
# The stack's keys main's program does not know (its config forbids extra keys), taken out of the stack file for its
# run, as a user's stack was before the upgrade: the secret proxyAuth (issue 50), which the shared stack sets though
# its proxy asks for none (this tree tells it is unused). A top-level key's name, or (key, field) for a nested one.
# The stack behind a proxy with a login is not this one (conftest's behind_proxy): main seeing that login's files
# gone would plan a files turn over SSH, which domains without a key refuse.
NEWER_KEYS: tuple[str | tuple[str, str], ...] = (f"{PROJECT}:proxyAuth",)


def main_program(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "-C", str(ROOT_DIR), "ls-tree", "--name-only", MAIN], capture_output=True, text=True, check=False
    ).stdout.split()
    # The program's entries main has (node/ is this tree's).
    entries = [entry for entry in PROGRAM_ENTRIES if entry in listed]
    archive = subprocess.run(
        ["git", "-C", str(ROOT_DIR), "archive", "--format=tar", MAIN, *entries],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        pytest.fail(f"git archive {MAIN} failed (a clone without main's history?): {archive.stderr.decode()[-500:]}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def stack_values(config: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix(f"{PROJECT}:"): v for k, v in config.items() if k.startswith(f"{PROJECT}:")}


def without_newer_keys(stack: PulumiStack) -> str:
    """Strips NEWER_KEYS from the stack file (plain and secret alike); returns the file as it was."""
    text = stack.stack_file.read_text()
    document = yaml.safe_load(text)
    config = document["config"]
    for key in NEWER_KEYS:
        if isinstance(key, tuple):
            config.get(key[0], {}).pop(key[1], None)
        else:
            config.pop(key, None)
    stack.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    return text


def link_program(stack: PulumiStack, root: Path) -> None:
    for entry in PROGRAM_ENTRIES:
        link = stack.project_dir / entry
        link.unlink(missing_ok=True)
        if (root / entry).exists():
            link.symlink_to(root / entry)


@pytest.fixture
def main_wrote_the_state(deployed: Deployed, tmp_path: Path) -> Iterator[Deployed]:
    main = main_program(tmp_path / "main")
    link_program(deployed.stack, main)
    assert (deployed.stack.project_dir / "__main__.py").resolve() == (main / "__main__.py").resolve()
    ours = without_newer_keys(deployed.stack)
    try:
        deployed.stack.up()
        # The user upgrades, then gives the login as this tree asks: the stack file is this tree's again.
        deployed.stack.stack_file.write_text(ours)
        yield deployed
    finally:
        deployed.stack.stack_file.write_text(ours)
        link_program(deployed.stack, ROOT_DIR)
        # The shared stack is this tree's again for the modules after this one, also when the test failed before
        # its own `up` of this tree (a state left as main wrote it made the next module's "no change" fail too).
        if changed(preview(deployed.stack)[0]):
            deployed.stack.up()


def nodes(deployed: Deployed) -> dict[str, dict[str, Any]]:
    """Each GPU Node's schedulability, turn state, rollout record and boot: what the re-run steps must not change."""
    found = deployed.plane.kubectl.json("get", "nodes")["items"]
    return {
        n["metadata"]["name"]: {
            "unschedulable": bool(n["spec"].get("unschedulable")),
            "turn-state": (n["metadata"].get("labels") or {}).get(TURN_STATE_LABEL),
            "rollout": (n["metadata"].get("annotations") or {}).get(ROLLOUT_ANNOTATION),
            "boot": n["status"]["nodeInfo"].get("bootID"),
        }
        for n in found
        if "gpu" in n["metadata"]["name"]
    }


def test_upgrading_from_main_runs_each_domains_node_steps_once_more_and_they_change_nothing(
    main_wrote_the_state: Deployed,
) -> None:
    deployed = main_wrote_the_state
    stack = deployed.stack
    link_program(stack, ROOT_DIR)
    document, failure = preview(stack)
    assert failure == "", failure[-3000:]
    assert changed(document) == ONE_TIME
    # What `pulumi preview --diff` says of the upgrade (docs/diff.md and issue 48's closing note quote it).
    said = stack.run("preview", "--diff", check=False)
    (ROOT_DIR / "build").mkdir(exist_ok=True)
    (ROOT_DIR / "build" / "upgrade-from-main.diff").write_text(said.stdout, encoding="utf-8")
    before, stops = nodes(deployed), len(deployed.pve.requests("POST", "/status/"))

    stack.up()

    assert set(last_update(stack)["resourceChanges"]) <= {"same", "update"}
    # Issue 47 item 4: main's records hold the driver version only; this tree plans no turn for them (no wave step
    # above) and each domain's rollout step adds the driver template's digest, the only change on the Nodes.
    after = nodes(deployed)
    template = stack_driver_template(validate_stack(stack_values(deployed.base)))
    for node, seen in before.items():
        record = json.loads(seen["rollout"])
        assert DRIVER_TEMPLATE_KEY not in record, record
        assert json.loads(after[node]["rollout"]) == {**record, DRIVER_TEMPLATE_KEY: template}, node
        assert {**after[node], "rollout": None} == {**seen, "rollout": None}, node
    assert len(deployed.pve.requests("POST", "/status/")) == stops, "a re-run step power-cycled a VM"
    again, failure = preview(stack)
    assert failure == "", failure[-3000:]
    assert changed(again) == {}
