"""The command line: JSON contracts, exit codes 0/1/2, and one line instead of a traceback for every error."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from day2.sources import DUMP_COMMAND
from tests.day2.cli_helpers import ROOT, Result, kubeconfig, run, run_script, write_dump
from tests.day2.k8s_objects import NOW, NOW_TEXT, Obj
from tests.day2.prometheus_server import free_port
from tests.day2.scenarios import NODES, broken_driver, healthy_pool, notebooks

HOLDER_KEYS = {"namespace", "pod", "node", "gpus", "cpuRequest", "ageSeconds", "phase", "terminating", "owner", "flags"}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("dumps")
    return {
        "notebooks": write_dump(directory / "notebooks.json", notebooks()),
        "stopped": write_dump(directory / "stopped.json", notebooks(stopped_pod_gone=True)),
        "healthy": write_dump(directory / "healthy.json", healthy_pool()),
        "broken": write_dump(directory / "broken.json", broken_driver()),
    }


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.code == 2, result
    assert result.out == ""
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    for fragment in fragments:
        assert fragment in result.err, result.err


# --- claims -----------------------------------------------------------------------------------------------


def test_claims_json_follows_the_contract(dumps: dict[str, Path]) -> None:
    result = run("claims", "--from", str(dumps["notebooks"]), "--now", NOW_TEXT, "-o", "json")
    document = result.json()

    assert result.code == 0 and set(document) == {"nodes", "holders", "waiting", "total"}
    assert all(set(n) == {"name", "allocatable", "allocated", "free", "expected"} for n in document["nodes"])
    assert all(set(h) == HOLDER_KEYS and set(h["owner"]) == {"kind", "name"} for h in document["holders"])
    assert all(set(w) == {"namespace", "pod", "gpus", "reason"} for w in document["waiting"])
    assert document["total"] == {"allocatable": 3, "allocated": 3, "free": 0}
    assert document["holders"][0] == {
        "namespace": "team-vision",
        "pod": "resnet-lab-0",
        "node": NODES["dc1"],
        "gpus": 1,
        "cpuRequest": 0.6,
        "ageSeconds": 105 * 86400,
        "phase": "Running",
        "terminating": False,
        "owner": {"kind": "Notebook", "name": "resnet-lab"},
        "flags": ["low-cpu", "long-held"],
    }


def test_expected_is_null_without_a_stack_and_the_profiles_slots_with_one(dumps: dict[str, Path]) -> None:
    plain = run("claims", "--from", str(dumps["healthy"]), "-o", "json").json()
    staged = run("claims", "--from", str(dumps["healthy"]), "--stack", "prod", "--stack-dir", str(ROOT), "-o", "json")

    assert [n["expected"] for n in plain["nodes"]] == [None, None, None]
    assert [n["expected"] for n in staged.json()["nodes"]] == [4, 4, 1]


def test_the_long_held_threshold_is_a_flag(dumps: dict[str, Path]) -> None:
    document = run("claims", "--from", str(dumps["notebooks"]), "--now", NOW_TEXT, "--long-held", "200d", "-o", "json")

    assert not any("long-held" in h["flags"] for h in document.json()["holders"])


def test_the_table_names_the_notebook_and_the_command_that_stops_it(dumps: dict[str, Path]) -> None:
    result = run("claims", "--from", str(dumps["notebooks"]), "--now", NOW_TEXT)

    assert result.code == 0
    assert "Notebook/resnet-lab" in result.out
    assert 'kubectl -n team-vision annotate notebook resnet-lab kubeflow-resource-stopped="$(date' in result.out
    assert "Terminating, still holding" in result.out and "team-nlp/llm-scratch-0" in result.out
    assert "\x1b[" not in result.out


def test_watch_prints_a_line_per_sample_and_shows_the_card_back_only_once_the_pod_is_gone(
    dumps: dict[str, Path], tmp_path: Path
) -> None:
    """The article's [01] Terminating FREE=1 / [02] gone FREE=2, here on three whole cards: 0 then 1."""
    live = tmp_path / "live.json"
    live.write_bytes(dumps["notebooks"].read_bytes())
    pauses: list[float] = []
    times = iter([NOW, NOW + timedelta(seconds=10)])

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 2:
            raise KeyboardInterrupt
        live.write_bytes(dumps["stopped"].read_bytes())

    result = run("claims", "--from", str(live), "--watch", "10", sleep=sleep, clock=lambda: next(times))

    dc1, dc2, dc3 = NODES.values()
    assert result.code == 0 and pauses == [10.0, 10.0]
    assert result.out.splitlines() == [
        f"[01] 2026-05-04T10:00:00Z free {dc1}=0 {dc2}=0 {dc3}=0 total=0/3 terminating=1",
        f"[02] 2026-05-04T10:00:10Z free {dc1}=0 {dc2}=1 {dc3}=0 total=1/3 terminating=0",
    ]


def test_watch_as_json_prints_one_object_per_line(dumps: dict[str, Path]) -> None:
    def stop(seconds: float) -> None:
        raise KeyboardInterrupt

    result = run(
        "claims", "--from", str(dumps["notebooks"]), "--watch", "5", "-o", "json", sleep=stop, clock=lambda: NOW
    )

    (line,) = result.out.splitlines()
    assert json.loads(line) == {
        "sample": 1,
        "time": "2026-05-04T10:00:00Z",
        "free": dict.fromkeys(NODES.values(), 0),
        "total": {"allocatable": 3, "allocated": 3, "free": 0},
        "terminating": 1,
    }


def test_a_dump_can_come_from_standard_input(dumps: dict[str, Path]) -> None:
    text = dumps["healthy"].read_text(encoding="utf-8")
    result = run_script("claims", "--from", "-", "-o", "json", stdin=text)

    from_file = run("claims", "--from", str(dumps["healthy"]), "-o", "json")
    assert result.code == 0 and result.json()["total"] == from_file.json()["total"]


# --- doctor -----------------------------------------------------------------------------------------------


def test_doctor_exits_0_when_every_floor_is_ok_and_1_when_one_is_broken(dumps: dict[str, Path]) -> None:
    assert run("doctor", "--from", str(dumps["healthy"])).code == 0
    assert run("doctor", "--from", str(dumps["broken"])).code == 1
    assert run("doctor", NODES["dc1"], "--from", str(dumps["broken"])).code == 0


def test_doctor_json_is_one_diagnosis_for_a_node_and_a_list_without_one(dumps: dict[str, Path]) -> None:
    one = run("doctor", NODES["dc2"], "--from", str(dumps["broken"]), "-o", "json").json()
    every = run("doctor", "--from", str(dumps["broken"]), "-o", "json").json()

    assert set(one) == {"node", "floors", "firstBroken", "fix"}
    assert one["firstBroken"] == "driver"
    assert [f["ok"] for f in one["floors"]] == [True, True, True, True, False, None, None, None, None, None, None, None]
    assert all(set(f) == {"name", "ok", "detail"} for f in one["floors"])
    assert one["fix"]["traps"] == ["trap 1: The driver gets OOM-killed, exit 137"]
    assert one["fix"]["command"].endswith("-c nvidia-driver-ctr --previous")
    assert [d["node"] for d in every] == sorted(NODES.values()) and every[1] == one
    assert every[0]["fix"] is None and every[0]["firstBroken"] is None


def test_the_doctor_table_shows_the_trap_and_the_next_command(dumps: dict[str, Path]) -> None:
    result = run("doctor", NODES["dc2"], "--from", str(dumps["broken"]))

    assert f"{NODES['dc2']}: broken at driver" in result.out
    assert "trap 1: The driver gets OOM-killed, exit 137" in result.out
    assert "next: kubectl -n gpu-operator logs nvidia-driver-daemonset-" in result.out


def _without_gpu_nodes() -> list[Obj]:
    return [o for o in healthy_pool() if o["kind"] != "Node" or "nodepool" not in o["metadata"].get("labels", {})]


def test_doctor_without_any_gpu_node_says_so_and_exits_1(tmp_path: Path) -> None:
    path = write_dump(tmp_path / "no-gpu.json", _without_gpu_nodes())
    result = run("doctor", "--from", str(path))

    assert result.code == 1 and "no GPU node found" in result.err


def test_the_installed_console_script_returns_the_same_exit_codes(dumps: dict[str, Path]) -> None:
    assert run_script("doctor", "--from", str(dumps["healthy"]), "-o", "json").code == 0
    assert run_script("doctor", "--from", str(dumps["broken"]), "-o", "json").code == 1
    assert_one_line_error(run_script("doctor", "--from", "/nonexistent/dump.json"), "cannot read it")


# --- errors: one line, exit 2 -----------------------------------------------------------------------------


def test_help_exits_0() -> None:
    assert run("--help").code == 0 and run("claims", "--help").code == 0


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "the following arguments are required"),
        (["holders"], "invalid choice"),
        (["claims", "--bogus"], "unrecognized arguments: --bogus"),
        (["claims", "--long-held", "a week"], "is not a duration"),
        (["claims", "--now", "yesterday"], "is not an RFC 3339 time"),
        (["claims", "--now", "2026-05-04T10:00:00"], "with a zone"),
        (["claims", "--watch", "0"], "above zero"),
        (["doctor", "--output", "yaml"], "invalid choice"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(argv: list[str], fragment: str) -> None:
    assert_one_line_error(run(*argv), fragment)


def test_a_dump_that_is_missing_not_json_or_not_a_list_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "pod.json").write_text(json.dumps({"kind": "Pod", "metadata": {}}), encoding="utf-8")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")

    assert_one_line_error(run("claims", "--from", str(tmp_path / "absent.json")), "cannot read it")
    assert_one_line_error(run("claims", "--from", str(tmp_path / "bad.json")), "not JSON", "line 1 column 2")
    assert_one_line_error(run("claims", "--from", str(tmp_path / "pod.json")), "not a JSON List", "kubectl get")
    assert_one_line_error(run("claims", "--from", str(tmp_path / "binary.json")), "not UTF-8")


def test_an_empty_a_yaml_and_a_cut_off_dump_each_get_their_own_message(tmp_path: Path, dumps: dict[str, Path]) -> None:
    full = dumps["healthy"].read_text(encoding="utf-8")
    (tmp_path / "empty.json").write_text("\n", encoding="utf-8")
    (tmp_path / "dump.yaml").write_text("apiVersion: v1\nitems: []\nkind: List\n", encoding="utf-8")
    (tmp_path / "cut.json").write_text(full[: len(full) // 2], encoding="utf-8")
    (tmp_path / "unclosed.json").write_text(full.rstrip()[:-1], encoding="utf-8")

    for command in ("claims", "doctor"):
        assert_one_line_error(run(command, "--from", str(tmp_path / "empty.json")), "is empty", "-o json > dump.json")
        assert_one_line_error(run(command, "--from", str(tmp_path / "dump.yaml")), "is YAML", "reads JSON", "-o json")
        assert_one_line_error(run(command, "--from", str(tmp_path / "cut.json")), "before the document ends", "cut off")
        assert_one_line_error(run(command, "--from", str(tmp_path / "unclosed.json")), "before the document ends")


@pytest.mark.parametrize(
    ("command", "kinds", "missing"),
    [
        ("claims", {"Pod", "ConfigMap", "Job"}, "no Nodes"),
        ("claims", {"Node"}, "no Pods"),
        ("doctor", {"Node", "Pod", "Job"}, "no ConfigMaps"),
        ("doctor", {"ConfigMap"}, "no Nodes and no Pods"),
    ],
)
def test_a_dump_lacking_a_kind_the_command_reads_is_refused_with_the_kubectl_line_that_writes_it_all(
    tmp_path: Path, command: str, kinds: set[str], missing: str
) -> None:
    path = write_dump(tmp_path / "partial.json", [o for o in healthy_pool() if o["kind"] in kinds])

    result = run(command, "--from", str(path))

    assert_one_line_error(result, missing, f"which {command} reads", f"{DUMP_COMMAND} > dump.json")


def test_a_podlist_alone_is_refused_for_lacking_nodes(tmp_path: Path) -> None:
    pods = [o for o in healthy_pool() if o["kind"] == "Pod"]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}), encoding="utf-8")

    assert_one_line_error(run("claims", "--from", str(tmp_path / "pods.json")), "no Nodes")


def test_an_unknown_node_is_a_usage_error_listing_the_gpu_nodes_the_dump_has(dumps: dict[str, Path]) -> None:
    result = run("doctor", "rke2-worker-dc1-gpu", "--from", str(dumps["healthy"]))

    assert_one_line_error(
        result,
        "doctor rke2-worker-dc1-gpu: no node of that name in the dump",
        "rke2-worker-dc1-gpu-a, rke2-worker-dc2-gpu-a, rke2-worker-dc3-gpu-a",
    )


def test_an_unknown_node_in_a_dump_without_gpu_nodes_says_none_carries_the_label(tmp_path: Path) -> None:
    path = write_dump(tmp_path / "no-gpu.json", _without_gpu_nodes())

    assert_one_line_error(run("doctor", "gpu-1", "--from", str(path)), "no GPU node (none carries nodepool=gpu)")


def test_a_stack_node_missing_from_the_cluster_stays_a_finding_not_a_usage_error(dumps: dict[str, Path]) -> None:
    objects = [o for o in healthy_pool() if o["metadata"]["name"] != "rke2-worker-dc1-gpu-a"]
    dump_path = dumps["healthy"].with_name("dc1-gone.json")
    write_dump(dump_path, objects)

    stack = ("--stack", "prod", "--stack-dir", str(ROOT))
    result = run("doctor", "rke2-worker-dc1-gpu-a", "--from", str(dump_path), *stack)

    assert result.code == 1 and "no node named rke2-worker-dc1-gpu-a in the cluster" in result.out


def test_a_dump_and_a_live_cluster_cannot_both_be_asked_for(dumps: dict[str, Path]) -> None:
    assert_one_line_error(run("claims", "--from", str(dumps["healthy"]), "--context", "lab"), "--from reads a dump")


def test_a_missing_or_invalid_stack_is_one_line(dumps: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  gpu-pool:failureDomains: []\n", encoding="utf-8")
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [\n", encoding="utf-8")
    dump = str(dumps["healthy"])

    assert_one_line_error(
        run("doctor", "--from", dump, "--stack", "nope", "--stack-dir", str(tmp_path)), "no stack file"
    )
    assert_one_line_error(run("doctor", "--from", dump, "--stack", "bad", "--stack-dir", str(tmp_path)), "not valid")
    assert_one_line_error(run("doctor", "--from", dump, "--stack", "broken", "--stack-dir", str(tmp_path)), "YAML")


def test_watch_and_prometheus_together_are_refused(dumps: dict[str, Path]) -> None:
    result = run("claims", "--from", str(dumps["healthy"]), "--watch", "1", "--prometheus", "http://127.0.0.1:9")

    assert_one_line_error(result, "drop --prometheus")


def test_an_unreachable_prometheus_is_one_line(dumps: dict[str, Path]) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    assert_one_line_error(run("claims", "--from", str(dumps["healthy"]), "--prometheus", url), f"--prometheus {url}")
    assert_one_line_error(run("claims", "--from", str(dumps["healthy"]), "--prometheus", "ftp://x"), "http(s)")


def test_an_unreachable_cluster_is_one_line_naming_the_context(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{free_port()}")

    result = run("claims", "--kubeconfig", str(config))

    assert_one_line_error(result, "cannot reach the API server https://127.0.0.1:", "(the current context)", "refused")
    assert_one_line_error(run("doctor", "--kubeconfig", str(config), "--context", "lab"), "context lab")


def test_a_missing_kubeconfig_an_unknown_context_or_a_garbled_file_is_one_line(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:6443")
    garbled = tmp_path / "garbled"
    garbled.write_text("clusters: [", encoding="utf-8")

    assert_one_line_error(run("claims", "--kubeconfig", str(tmp_path / "absent")), "cannot load")
    assert_one_line_error(run("claims", "--kubeconfig", str(config), "--context", "elsewhere"), "context elsewhere")
    assert_one_line_error(run("claims", "--kubeconfig", str(garbled)), "cannot load")


def test_the_stacks_kubernetes_settings_are_the_default_for_a_live_cluster(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{free_port()}", context="from-stack")
    stack = (ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8")
    stack += f"  gpu-pool:kubernetes:\n    kubeconfig: {config}\n    context: from-stack\n"
    (tmp_path / "Pulumi.lab.yaml").write_text(stack, encoding="utf-8")

    assert_one_line_error(run("claims", "--stack", "lab", "--stack-dir", str(tmp_path)), "context from-stack")


def test_ages_are_judged_now_unless_told_otherwise(dumps: dict[str, Path]) -> None:
    later = run("claims", "--from", str(dumps["notebooks"]), "-o", "json", clock=lambda: NOW + timedelta(days=1))
    fixed = run("claims", "--from", str(dumps["notebooks"]), "-o", "json", "--now", NOW_TEXT, clock=datetime.now)

    assert later.json()["holders"][0]["ageSeconds"] == 106 * 86400
    assert fixed.json()["holders"][0]["ageSeconds"] == 105 * 86400


def test_a_dump_with_objects_of_no_kubernetes_shape_ends_in_one_line_not_a_traceback(tmp_path: Path) -> None:
    items = [
        {"kind": "Node", "metadata": {"name": "n1", "labels": {"nodepool": "gpu"}}, "spec": "oops", "status": [1]},
        {
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "gpu-operator", "labels": {"app": "nvidia-driver-daemonset"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "x"}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "state": "running", "lastState": 7}]},
        },
    ]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")

    for argv in (["claims"], ["doctor"], ["doctor", "n1", "-o", "json"]):
        result = run(*argv, "--from", str(path))
        assert result.code in (0, 1, 2) and "Traceback" not in result.err
        assert result.code != 2 or result.err.count("\n") == 1


def test_even_a_bug_is_one_line_unless_debugging_asks_for_the_traceback(
    dumps: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("day2.claims.command.compute_claims", broken)
    assert_one_line_error(
        run("claims", "--from", str(dumps["healthy"])), "unexpected error: RuntimeError: boom second line"
    )

    monkeypatch.setenv("GPU_POOL_DEBUG", "1")
    with pytest.raises(RuntimeError):
        run("claims", "--from", str(dumps["healthy"]))


def test_without_the_day2_packages_installed_the_tool_says_which_and_how_to_get_them(dumps: dict[str, Path]) -> None:
    """`make preview` syncs without the day2 group; gpu-pool must then say so in one line, not a traceback."""
    script = (
        "import sys; sys.modules['rich'] = None; sys.modules['kubernetes'] = None\n"
        "from day2.cli import main\n"
        f"sys.exit(main(['claims', '--from', {str(dumps['healthy'])!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )

    assert_one_line_error(
        Result(done.returncode, done.stdout, done.stderr), "package rich is not installed", "--group day2"
    )
