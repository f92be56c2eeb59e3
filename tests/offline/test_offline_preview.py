"""The offline preview of a stack: the README's main command, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import yaml

from offline.preview import main
from offline.runner import ROOT_DIR, run_stack

SENTINEL_TOKEN = "sentinel-rke2-token-7f3a91"
SENTINEL_API = "pulumi@pve!gpu-pool=5e471e11-0b1c-4d2e-9f3a-7f3a91c0ffee"


def preview(out: Path, *extra: str) -> int:
    return main(["--stack", "prod", "--out", str(out), "--quiet", *extra])


def test_prod_preview_succeeds_and_writes_plan_manifests_and_graph(tmp_path: Path) -> None:
    assert preview(tmp_path) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert set(plan) == {"project", "stack", "resources", "outputs"}
    assert (plan["project"], plan["stack"]) == ("gpu-pool", "prod")
    options = {"deleteBeforeReplace", "ignoreChanges", "replaceOnChanges"}
    for resource in plan["resources"]:
        assert {"urn", "type", "name", "parent", "dependsOn", "protect", "inputs"} <= set(resource)
        assert set(resource) - {"urn", "type", "name", "parent", "dependsOn", "protect", "inputs"} <= options
    assert plan["outputs"]["schedulableGpuSlots"] == 9
    assert any(p.name.startswith("node-rke2-worker-dc1-gpu-a") for p in (tmp_path / "manifests").iterdir())
    assert (tmp_path / "graph.mmd").read_text().startswith("flowchart")


def test_plan_json_carries_the_operator_release_values_as_helm_would_get_them(tmp_path: Path) -> None:
    preview(tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    release = next(r for r in plan["resources"] if r["type"] == "kubernetes:helm.sh/v3:Release")
    values = release["inputs"]["values"]
    assert values["driver"]["version"] == "595.91.07"
    assert values["devicePlugin"]["config"]["name"] == "time-slicing-config"
    assert release["dependsOn"], "the release must wait for its namespace and ConfigMaps"


def test_unknown_values_are_shown_as_computed(tmp_path: Path) -> None:
    preview(tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    ready = next(r for r in plan["resources"] if r["name"] == "dc1-node-ready")
    # The VM's id is only known once it exists.
    assert ready["inputs"]["triggers"][0] == "<computed>"


def test_two_previews_of_the_same_config_write_byte_identical_files(tmp_path: Path) -> None:
    preview(tmp_path / "a")
    preview(tmp_path / "b")
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_given_secrets_never_appear_in_stdout_plan_or_manifests(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "offline.preview", "--stack", "prod", "--out", str(tmp_path),
            "--secret", f"rke2Token={SENTINEL_TOKEN}", "--secret", f"proxmoxApiToken={SENTINEL_API}",
        ],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "[secret]" in result.stdout
    for text in [result.stdout, result.stderr] + [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]:
        assert SENTINEL_TOKEN not in text
        assert SENTINEL_API not in text


def test_the_join_token_is_shown_as_secret_in_the_plan(tmp_path: Path) -> None:
    preview(tmp_path, "--secret", f"rke2Token={SENTINEL_TOKEN}")
    plan = json.loads((tmp_path / "plan.json").read_text())
    snippet = next(r for r in plan["resources"] if r["name"] == "dc1-cloud-init")
    assert snippet["inputs"]["sourceRaw"]["data"] == "[secret]"


@pytest.fixture
def bad_stack_dir(tmp_path: Path) -> Path:
    config = yaml.safe_load((ROOT_DIR / "Pulumi.prod.yaml").read_text())
    config["config"]["gpu-pool:failureDomains"][1]["gpu"]["pciAddress"] = "1:0"
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


def test_invalid_config_exits_non_zero_with_the_message_and_no_traceback(tmp_path: Path, bad_stack_dir: Path):
    result = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack-dir", str(bad_stack_dir), "--out", str(tmp_path / "o")],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "gpu-pool:failureDomains[dc2].gpu.pciAddress: is not a PCI address" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "o" / "plan.json").exists()


def test_each_vms_cloud_init_is_written_for_review_with_secrets_replaced_by_markers(tmp_path: Path) -> None:
    import yaml

    from components.gpu_failure_domain.cloud_init import build_user_data
    from components.stack_check import validate_stack
    from offline.runner import read_stack_file

    assert preview(tmp_path, "--secret", f"rke2Token={SENTINEL_TOKEN}") == 0
    stack = validate_stack({k.partition(":")[2]: v for k, v in read_stack_file("prod").items()})
    for domain in stack.failure_domains:
        text = (tmp_path / "cloud-init" / f"{domain.name}.yaml").read_text()
        assert text.startswith("#cloud-config\n# gpu-pool offline preview")
        assert SENTINEL_TOKEN not in text
        expected = build_user_data(domain, stack.rke2, "<secret gpu-pool:rke2Token>")
        assert yaml.safe_load(text) == yaml.safe_load(expected)


def test_the_operator_values_are_written_as_the_release_gets_them(tmp_path: Path) -> None:
    import yaml

    preview(tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    release = next(r for r in plan["resources"] if r["type"] == "kubernetes:helm.sh/v3:Release")
    written = yaml.safe_load((tmp_path / "gpu-operator-values.yaml").read_text())
    assert written == release["inputs"]["values"]


def test_the_console_ends_with_the_outputs_and_what_the_offline_preview_could_not_know(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "prod", "--out", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert "Outputs:" in lines and "  schedulableGpuSlots: 9" in lines
    assert lines[-2].startswith("Secrets not given, placeholders used: gpu-pool:proxmoxApiToken, gpu-pool:rke2Token")
    assert lines[-1].startswith("Host and cluster preflight skipped")


def test_with_kyverno_off_the_preview_prints_the_pod_lines_with_the_stacks_own_taint_and_label() -> None:
    from offline.preview import steering_note

    config = {
        "gpu-pool:kyverno": {
            "enabled": False,
            "taintKey": "gpu.example.com/dedicated",
            "taintEffect": "NoExecute",
            "gpuNodeLabelKey": "accelerator",
            "gpuNodeLabelValue": "nvidia",
        }
    }

    note = steering_note(config)

    assert 'key: gpu.example.com/dedicated, operator: Equal, value: "true", effect: NoExecute' in note
    assert "nodeSelector: {accelerator: nvidia}" in note
    assert steering_note({}) == ""


def test_the_readmes_without_kyverno_snippet_is_the_default_marking_the_program_prints() -> None:
    import re

    from config.kyverno import KyvernoConfig
    from offline.runner import ROOT_DIR

    readme = (ROOT_DIR / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Without Kyverno or Prometheus", 1)[1]
    snippet = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)

    assert snippet is not None and snippet.group(1) == KyvernoConfig().pod_spec_lines()


def test_an_offline_preview_sends_no_stack_trace_the_mock_monitor_would_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's per-resource walk of the Python stack is for the engine, which records where a resource was
    declared; under the mocks nobody reads it, and it was a tenth of an offline preview."""
    walks: list[int] = []
    extract_stack = traceback.extract_stack

    def counted(*args: object, **kwargs: object) -> traceback.StackSummary:
        walks.append(1)
        return extract_stack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(traceback, "extract_stack", counted)
    recording = run_stack("prod")

    assert len(recording.registrations) > 50
    assert walks == []


def test_registry_credentials_reach_the_snippet_and_the_preview_shows_only_their_marker(tmp_path: Path) -> None:
    auth = '{"mirror.lab.internal": {"auth": {"username": "robot-7f3a91", "password": "sentinel-pass-7f3a91"}}}'
    config = yaml.safe_load((ROOT_DIR / "Pulumi.prod.yaml").read_text())
    config["config"]["gpu-pool:registryMirrors"] = {"docker.io": ["http://mirror.lab.internal"]}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(config))

    result = subprocess.run(
        [
            sys.executable, "-m", "offline.preview", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "o"),
            "--secret", f"registryAuth={auth}",
        ],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    for text in [result.stdout, result.stderr] + [p.read_text() for p in (tmp_path / "o").rglob("*") if p.is_file()]:
        assert "sentinel-pass-7f3a91" not in text and "robot-7f3a91" not in text
    document = yaml.safe_load((tmp_path / "o" / "cloud-init" / "dc1.yaml").read_text())
    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]
    configs = yaml.safe_load(file["content"])["configs"]
    assert configs == {
        "mirror.lab.internal": {
            "auth": {"username": "<secret gpu-pool:registryAuth>", "password": "<secret gpu-pool:registryAuth>"}
        }
    }
