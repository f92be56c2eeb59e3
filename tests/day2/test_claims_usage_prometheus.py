"""`gpu-pool claims --usage` against a real Prometheus (Debian's package) on loopback: raw kube-state-metrics and
DCGM series backfilled with promtool, the usage recording rules' output backfilled from them with
`promtool tsdb create-blocks-from rules`, and the GPU-hours the command prints checked against the scenario.

Backfilling a rule that reads another rule of the batch sees nothing (promtool evaluates each rule against the
Prometheus it is given, which does not hold the batch's own output yet), so the constants go first, as
Prometheus' docs advise: a pass for gpu_pool_node_slots_per_card, then one for the rules that divide by it.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.usage_rules import SLOTS_PER_CARD, build_usage_group
from config.secrets import PROMETHEUS_PASSWORD_ENV
from day2.cli import main
from tests.day2.k8s_objects import NOW, NOW_TEXT, dump
from tests.day2.prometheus_server import backfill, openmetrics, running_prometheus
from tests.gpu_platform.prometheus_tools import require

DC1, DC2, DC3 = "rke2-worker-dc1-gpu-a", "rke2-worker-dc2-gpu-a", "rke2-worker-dc3-gpu-a"
SLOTS_PER_CARD_BY_NODE = {DC1: 4, DC2: 4, DC3: 1}
KSM = {"job": "kube-state-metrics", "instance": "10.42.0.9:8080"}
RAW_FROM = NOW - timedelta(hours=3)
# The rules were loaded 90 minutes before NOW: a 2 h range has data for its last 90 minutes only.
RULES_FROM = NOW - timedelta(minutes=90)
OWNERS = {"team-a": "alice@example.org", "team-b": "bob@example.org"}
# Prometheus (and promtool's backfill) starts a group's evaluations at an offset within the interval taken from a
# hash of the group and its file, so 90 minutes hold 89 or 90 samples: GPU-hours are exact to one interval (one
# sample of 1 GPU = 1/60 h), which is the answer's own resolution.
ONE_SAMPLE = 60 / 3600
ROUNDING = 1e-4  # the JSON's 4 decimals


def minutes(start: datetime, end: datetime) -> list[datetime]:
    count = int((end - start).total_seconds() // 60)
    return [start + timedelta(minutes=i) for i in range(count + 1)]


def pod_series(namespace: str, pod: str, node: str, slots: int, phase: str) -> list[Any]:
    times = minutes(RAW_FROM, NOW)
    request = {
        **KSM,
        "namespace": namespace,
        "pod": pod,
        "container": "main",
        "node": node,
        "resource": "nvidia_com_gpu",
        "unit": "integer",
        "uid": f"{pod}-uid",
    }
    phases = [
        (
            "kube_pod_status_phase",
            {**KSM, "namespace": namespace, "pod": pod, "uid": f"{pod}-uid", "phase": name},
            [(t, 1.0 if name == phase else 0.0) for t in times],
        )
        for name in ("Pending", "Running")
    ]
    return [("kube_pod_container_resource_requests", request, [(t, float(slots)) for t in times]), *phases]


def utilisation(node: str, percent: float, pod: str, namespace: str) -> Any:
    labels = {
        "Hostname": node,
        "gpu": "0",
        "UUID": f"GPU-{node}",
        "job": "nvidia-dcgm-exporter",
        "instance": "10.42.1.7:9400",
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-bqh48",
        "exported_namespace": namespace,
        "exported_pod": pod,
    }
    return ("DCGM_FI_DEV_GPU_UTIL", labels, [(t, percent) for t in minutes(RAW_FROM, NOW)])


def raw_series() -> str:
    """team-a: 4 notebooks x 1 slot on dc1 (x4), busy; team-b: a whole card on dc3, idle (1 %); team-c: a bound
    Pending pod; team-e: one pod alone on dc2 (x4), busy."""
    series = [s for i in range(4) for s in pod_series("team-a", f"nb-{i}", DC1, 1, "Running")]
    series += pod_series("team-b", "train", DC3, 1, "Running")
    series += pod_series("team-c", "waiting", DC2, 1, "Pending")
    series += pod_series("team-e", "solo", DC2, 1, "Running")
    series += [
        utilisation(DC1, 70.0, "nb-0", "team-a"),
        utilisation(DC3, 1.0, "train", "team-b"),
        utilisation(DC2, 60.0, "solo", "team-e"),
    ]
    return openmetrics(series)


def backfill_rules(promtool: str, url: str, rules: list[dict[str, Any]], directory: Path, name: str) -> Path:
    group = build_usage_group(SLOTS_PER_CARD_BY_NODE, 5.0)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"groups": [{**group, "rules": rules}]}, sort_keys=False), encoding="utf-8")
    output = directory / f"{name}-blocks"
    subprocess.run(
        [
            promtool, "tsdb", "create-blocks-from", "rules",
            f"--start={RULES_FROM.timestamp():.0f}", f"--end={NOW.timestamp():.0f}",
            f"--url={url}", f"--output-dir={output}", str(path),
        ],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return output


def add_blocks(blocks: Path, data: Path) -> None:
    for block in blocks.iterdir():
        if block.is_dir():
            shutil.move(str(block), str(data / block.name))


@pytest.fixture(scope="module")
def usage_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The raw series and the usage rules' output, backfilled: (the TSDB, its folder)."""
    promtool, prometheus = require("promtool"), require("prometheus")
    directory = tmp_path_factory.mktemp("usage")
    data = backfill(promtool, raw_series(), directory)
    rules = build_usage_group(SLOTS_PER_CARD_BY_NODE, 5.0)["rules"]
    constants = [r for r in rules if r["record"] == SLOTS_PER_CARD]
    dependent = [r for r in rules if r["record"] != SLOTS_PER_CARD]
    for name, batch in (("constants", constants), ("usage", dependent)):
        with running_prometheus(prometheus, data, directory) as url:
            blocks = backfill_rules(promtool, url, batch, directory, name)
        add_blocks(blocks, data)
    return data, directory


@pytest.fixture(scope="module")
def prometheus_url(usage_data: tuple[Path, Path]) -> Iterator[str]:
    data, directory = usage_data
    with running_prometheus(require("prometheus"), data, directory) as url:
        yield url


# A Prometheus that asks for basic auth (its web config's basic_auth_users), as a lab's often does (issue 50).
USER, PASSWORD = "admin", "canary-p#ss:w0rd"


@pytest.fixture(scope="module")
def prometheus_with_login(usage_data: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data, _ = usage_data
    directory = tmp_path_factory.mktemp("usage-login")
    # Its own copy of the blocks: two servers never share a TSDB.
    shutil.copytree(data, directory / "data", ignore=shutil.ignore_patterns("lock", "wal", "chunks_head"))
    with running_prometheus(require("prometheus"), directory / "data", directory, basic_auth=(USER, PASSWORD)) as url:
        yield url


def namespaces_dump(tmp_path: Path) -> Path:
    names = ["team-a", "team-b", "team-c", "team-e"]
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/metadata.name": name},
                **({"annotations": {"owner": OWNERS[name]}} if name in OWNERS else {}),
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for name in names
    ]
    path = tmp_path / "namespaces.json"
    path.write_text(json.dumps(dump(objects)), encoding="utf-8")
    return path


def usage(tmp_path: Path, url: str, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["claims", "--usage", "--from", str(namespaces_dump(tmp_path)), "--now", NOW_TEXT, "--prometheus", url]
    code = main([*argv, *extra], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def usage_json(tmp_path: Path, url: str, since: str = "2h") -> dict[str, Any]:
    code, out, err = usage(tmp_path, url, "--since", since, "-o", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["namespace"]: row for row in document["namespaces"]}


def test_gpu_hours_are_held_gpus_times_hours_time_slice_aware(tmp_path: Path, prometheus_url: str) -> None:
    by_namespace = rows(usage_json(tmp_path, prometheus_url))

    # 90 minutes of data: 4 quarter-cards = 1 GPU -> 1.5; a whole card -> 1.5; 1 of 4 slots -> 0.375.
    assert by_namespace["team-a"]["gpuHours"] == pytest.approx(1.5, abs=ONE_SAMPLE + ROUNDING)
    assert by_namespace["team-b"]["gpuHours"] == pytest.approx(1.5, abs=ONE_SAMPLE + ROUNDING)
    assert by_namespace["team-e"]["gpuHours"] == pytest.approx(0.375, abs=ONE_SAMPLE / 4 + ROUNDING)
    assert by_namespace["team-a"]["slotHours"] == pytest.approx(6.0, abs=4 * ONE_SAMPLE + ROUNDING)
    # Whatever the offset, the three are the same samples: a quarter card is exactly a quarter of a whole one.
    assert by_namespace["team-e"]["gpuHours"] == pytest.approx(by_namespace["team-b"]["gpuHours"] / 4, abs=ROUNDING)
    # A Pending pod holds nothing.
    assert "team-c" not in by_namespace


def test_the_answer_says_from_when_data_exists_inside_the_range(tmp_path: Path, prometheus_url: str) -> None:
    document = usage_json(tmp_path, prometheus_url)

    assert document["from"] == "2026-05-04T08:00:00Z" and document["to"] == NOW_TEXT
    # The first recorded sample: within the first interval after the rules were loaded (Prometheus spreads group
    # evaluations over the interval by a hash of the group, and promtool's backfill does the same).
    first = datetime.fromisoformat(document["dataFrom"])
    assert RULES_FROM <= first < RULES_FROM + timedelta(minutes=1)
    assert document["intervalSeconds"] == 60


def test_the_idle_share_is_the_part_of_held_hours_on_idle_cards(tmp_path: Path, prometheus_url: str) -> None:
    by_namespace = rows(usage_json(tmp_path, prometheus_url))

    assert by_namespace["team-b"]["idleShare"] == pytest.approx(1.0)
    assert by_namespace["team-a"]["idleShare"] == 0


def test_gpu_hours_add_up_per_kubeflow_profile_owner(tmp_path: Path, prometheus_url: str) -> None:
    owners = {row["owner"]: row for row in usage_json(tmp_path, prometheus_url)["owners"]}

    assert set(owners) == {"alice@example.org", "bob@example.org"}
    assert owners["alice@example.org"]["namespaces"] == ["team-a"]
    assert owners["alice@example.org"]["gpuHours"] == pytest.approx(1.5, abs=ONE_SAMPLE + ROUNDING)
    assert rows(usage_json(tmp_path, prometheus_url))["team-e"]["owner"] is None


def test_a_shorter_range_counts_only_its_own_samples(tmp_path: Path, prometheus_url: str) -> None:
    by_namespace = rows(usage_json(tmp_path, prometheus_url, since="30m"))

    assert by_namespace["team-a"]["gpuHours"] == pytest.approx(0.5, abs=ONE_SAMPLE + ROUNDING)


def test_the_table_names_each_namespace_its_owner_and_its_hours(tmp_path: Path, prometheus_url: str) -> None:
    code, out, err = usage(tmp_path, prometheus_url, "--since", "2h")

    assert code == 0, err
    assert "data from 2026-05-04T08:30:" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("team-")}
    assert lines["team-a"][:2] == ["team-a", "alice@example.org"]
    assert float(lines["team-a"][2]) == pytest.approx(1.5, abs=ONE_SAMPLE + 0.005)
    assert lines["team-b"][-1] == "100%"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["claims", "--usage"], "pass --prometheus URL"),
        (["claims", "--usage", "--prometheus", "http://127.0.0.1:9", "--since", "7 days"], "not a Prometheus duration"),
        (["claims", "--usage", "--prometheus", "http://127.0.0.1:9", "--watch", "5"], "drop --watch"),
    ],
)
def test_usage_input_mistakes_are_one_line_naming_the_fix(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()

    assert main(argv, out=out, err=err) == 2
    assert message in err.getvalue() and "Traceback" not in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_usage_reads_a_prometheus_that_asks_for_basic_auth_with_the_password_from_the_environment(
    tmp_path: Path, prometheus_with_login: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROMETHEUS_PASSWORD_ENV, PASSWORD)

    code, out, err = usage(tmp_path, prometheus_with_login, "--prometheus-user", USER, "-o", "json", "--since", "2h")

    assert code == 0, err
    assert "team-a" in rows(json.loads(out))
    assert PASSWORD not in out + err


def test_usage_takes_basic_auth_split_off_a_urls_login_and_never_prints_it(
    tmp_path: Path, prometheus_with_login: str
) -> None:
    with_login = prometheus_with_login.replace("http://", f"http://{USER}:{PASSWORD}@")

    code, out, err = usage(tmp_path, with_login, "--since", "2h")

    assert code == 0, err
    assert "team-a" in out and PASSWORD not in out + err


def test_a_prometheus_that_asks_for_a_login_and_gets_none_says_how_to_give_one(
    tmp_path: Path, prometheus_with_login: str
) -> None:
    code, _, err = usage(tmp_path, prometheus_with_login)

    assert code == 2
    assert "HTTP 401" in err and "--prometheus-user NAME" in err and "GPU_POOL_PROMETHEUS_PASSWORD" in err


def test_a_wrong_password_is_refused_by_prometheus_and_not_repeated(tmp_path: Path, prometheus_with_login: str) -> None:
    wrong = "canary-wrong#pw"
    code, _, err = usage(tmp_path, prometheus_with_login.replace("http://", f"http://{USER}:{wrong}@"))

    assert code == 2
    assert "the login given was not accepted" in err
    assert wrong not in err and "canary" not in err and f"--prometheus {prometheus_with_login}:" in err
