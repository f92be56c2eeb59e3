"""`pulumi preview` of this program under the real engine: the CLI, the Python language host and the real providers.

The cluster is the e2e tier's real kube-apiserver (with the upstream CRDs); the chart is the vendored v26.x chart,
packaged with its real version and named as a local chart source, as an air-gapped lab would. The Proxmox side
needs nothing at preview: the providers' Check and Diff run locally, and the program's preflights are off
(GPU_POOL_OFFLINE=1, as `make preview` runs them); `test_engine_up.py` runs them against the stand-in.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from offline.runner import PROJECT
from tests.e2e.engine import PulumiStack, step_ops
from tests.e2e.engine_stacks import SECRETS, offline_plan_names

pytestmark = pytest.mark.usefixtures("crds")


@pytest.fixture(scope="module")
def previewed(prod_engine_stack: PulumiStack) -> dict[str, Any]:
    return prod_engine_stack.preview_json()


def test_the_real_engine_previews_every_resource_the_offline_preview_plans(
    prod_engine_stack: PulumiStack, prod_engine_config: dict[str, Any], previewed: dict[str, Any]
) -> None:
    ops = step_ops(previewed)
    assert set(ops) == offline_plan_names(prod_engine_config) | {f"{PROJECT}-{prod_engine_stack.name}"}
    assert set(ops.values()) == {"create"}
    errors = [d for d in previewed.get("diagnostics", []) if d.get("severity") == "error"]
    assert errors == []


def test_secrets_reach_the_program_as_secrets_and_never_appear_in_the_preview(
    prod_engine_stack: PulumiStack, previewed: dict[str, Any]
) -> None:
    stack_file = prod_engine_stack.stack_file.read_text()
    done = prod_engine_stack.run("preview", "--diff", "--show-sames")
    for value in SECRETS.values():
        assert value not in stack_file
        assert value not in done.stdout + done.stderr
        assert value not in json.dumps(previewed)
    written = yaml.safe_load(stack_file)["config"]
    for key in SECRETS:
        assert set(written[f"{PROJECT}:{key}"]) == {"secure"}, f"{key} is not stored as a ciphertext"


def test_every_debug_message_of_the_sdk_reaches_the_engine_in_order_before_the_program_ends(
    prod_engine_stack: PulumiStack, previewed: dict[str, Any]
) -> None:
    """The SDK's debug messages go through components/shared/language_host.py's thread: none may be lost or come
    out of the order the SDK logged them in. (That the last ones are sent at exit however late the engine answers
    is shown in tests/shared/test_language_host.py, which can hold the engine; here it answers at once.)"""
    # The engine's events as they happen, one JSON document a line, with the debug diagnostics `--debug` keeps.
    done = prod_engine_stack.run("preview", "--debug", "--json", env={"PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true"})
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    debug = [
        event["diagnosticEvent"]["message"].strip()
        for event in events
        if event.get("diagnosticEvent", {}).get("severity") == "debug"
    ]
    for name in step_ops(previewed):
        quoted = re.escape(name)
        sequence = [
            next((i for i, text in enumerate(debug) if re.fullmatch(pattern, text)), None)
            for pattern in (
                rf"registering resource: ty=[^,]+, name={quoted}, custom=.*",
                rf"resource registration prepared: ty=[^,]+, name={quoted}",
                rf"resource registration successful: ty=[^,]+, urn=\S+::{quoted}",
            )
        ]
        found = [i for i in sequence if i is not None]
        assert len(found) == len(sequence), f"{name}: the SDK's debug messages are missing: {sequence}"
        assert found == sorted(found), f"{name}: the SDK's debug messages arrived out of order"
    # The SDK's last message, logged after every registration: sent before the program's process ended.
    assert debug[-1] == "run_pulumi_func completed"
