"""The seam the in-cluster watcher needs: `decide`, the Node reader and the guard rails run without pydantic or the
config models, from the stack's facts computed at preview (UnattendedFacts, as JSON), packed as the health check
packs its code (components/shared/payload.py: the import closure and PyYAML's pure-Python modules). Checked by
running the packed zip with every site package hidden, so pydantic cannot be imported, against the same verdict
computed here from the validated config."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import (
    REPAIRS_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    observed_node,
)
from components.shared.payload import module_closure, pyyaml_files, zipapp
from components.stack_check import validate_stack
from day2.repair.decide import Decision
from day2.repair.unattended import Breaker, Pool, UnattendedFacts, breaker_data, verdict
from offline.runner import read_stack_file

WATCHER_MODULES = ["day2.repair.unattended", "day2.repair.decide", "components.gpu_failure_domain.observed"]
NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)
XID = "node:health: Xid 79 on 0000:01:00.0 (fallen off the bus)"

# The zip's entry: the verdict from facts.json, nodes.json (as `kubectl get nodes -o json` lists them) and the
# breaker's ConfigMap data, printed as JSON; it fails if anything it imported pulled pydantic in.
MAIN = f"""
import datetime, json, sys
from components.gpu_failure_domain.observed import observed_node
from day2.repair.decide import Decision
from day2.repair.unattended import Pool, UnattendedFacts, breaker_of, verdict

facts = UnattendedFacts.from_json(json.load(open("facts.json")))
items = {{i["metadata"]["name"]: i for i in json.load(open("nodes.json"))["items"]}}
nodes = {{d.name: observed_node(items[d.hostname]) if d.hostname in items else None for d in facts.domains}}
breaker = breaker_of(json.load(open("breaker.json")))
now = datetime.datetime({NOW.year}, {NOW.month}, {NOW.day}, {NOW.hour}, tzinfo=datetime.UTC)
result = verdict(facts, "dc1", Decision(True, {XID!r}), Pool(nodes, breaker), now)
assert "pydantic" not in sys.modules, sorted(m for m in sys.modules if m.startswith("pydantic"))
print(json.dumps({{"repair": result.repair, "reasons": [str(r) for r in result.reasons]}}))
"""


def _cfg() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    return validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})


def _node(name: str, *, ready: bool = True, holder: str = "", cycles: int = 0) -> dict[str, Any]:
    annotations = {TURN_HOLDER_ANNOTATION: holder} if holder else {}
    labels = {TURN_STATE_LABEL: "repairing"} if holder else {}
    if cycles:
        at = (NOW - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        annotations[REPAIRS_ANNOTATION] = json.dumps([{"at": at, "event": "power-cycle"}] * cycles)
    status = "True" if ready else "False"
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": status}]},
    }


def test_the_watchers_pure_modules_pack_without_the_pydantic_bound_config() -> None:
    files = module_closure(WATCHER_MODULES)

    assert not [
        path for path in files if path.startswith("config/") and path not in ("config/__init__.py", "config/window.py")
    ]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("serving", []),
        ("another domain out", ["AnotherDomainOut"]),
        ("held by a person", ["NodeHeld"]),
        ("budget spent", ["DailyBudgetSpent"]),
        ("breaker open", ["BreakerOpen"]),
    ],
)
def test_the_packed_guard_rails_give_the_configs_verdict_with_every_site_package_hidden(
    tmp_path: Path, state: str, expected: list[str]
) -> None:
    cfg = _cfg()
    host = {d.name: d.hostname for d in cfg.failure_domains}
    nodes = {
        name: _node(
            hostname,
            ready=not (state == "another domain out" and name == "dc2"),
            holder="repair:ana@laptop" if state == "held by a person" and name == "dc3" else "",
            cycles=cfg.repair.max_per_day if state == "budget spent" and name == "dc1" else 0,
        )
        for name, hostname in host.items()
    }
    breaker = Breaker(open=state == "breaker open")
    (tmp_path / "facts.json").write_text(json.dumps(UnattendedFacts.of(cfg).as_json()), encoding="utf-8")
    (tmp_path / "nodes.json").write_text(json.dumps({"items": list(nodes.values())}), encoding="utf-8")
    (tmp_path / "breaker.json").write_text(json.dumps(breaker_data(breaker)), encoding="utf-8")
    (tmp_path / "watcher.pyz").write_bytes(zipapp([*module_closure(WATCHER_MODULES).items(), *pyyaml_files()], MAIN))

    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "watcher.pyz"], cwd=tmp_path, capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
    here = verdict(
        UnattendedFacts.of(cfg),
        "dc1",
        Decision(True, XID),
        Pool({name: observed_node(node) for name, node in nodes.items()}, breaker),
        NOW,
    )
    assert json.loads(done.stdout) == {"repair": not expected, "reasons": expected}
    assert [str(r) for r in here.reasons] == expected
