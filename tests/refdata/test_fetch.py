"""`make upstream`: every declared file is checked against its recorded digest before the set is installed; a mirror
is read the same way; a tool the public path needs and does not find is named with how to get it. (The public path
itself runs against loopback servers in tests/e2e/test_upstream_fetch.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from refdata.fetch import (
    COMPLETE,
    DIGESTS,
    ROOT,
    canonical,
    dcgm_field_names,
    digest,
    is_complete,
    kube_state_metric_names,
    load_digests,
)
from refdata.sources import SOURCES, SUMS_FOLDERS, GitHubArchive, GoModuleFiles, HelmChart, PulumiSchema


def _fetch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "refdata.fetch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )


def _mirror_copy(upstream: Path, to: Path) -> Path:
    for dest in load_digests():
        (to / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(upstream / dest, to / dest)
    return to


def test_every_declared_source_has_recorded_digests_and_every_digest_a_source() -> None:
    recorded = load_digests()
    charts = [s.dest + "/" for s in SOURCES if isinstance(s, HelmChart | GitHubArchive)]
    single = {d for s in SOURCES if isinstance(s, GoModuleFiles) for d in s.files.values()}
    single |= {s.dest for s in SOURCES if not isinstance(s, HelmChart | GitHubArchive | GoModuleFiles)}

    assert set(recorded) == single | {d for d in recorded if d.startswith(tuple(charts))}
    assert single <= set(recorded)
    assert all(any(d.startswith(c) for d in recorded) for c in charts)


def test_from_a_mirror_every_file_is_checked_and_the_folder_records_which_digests(
    upstream: Path, tmp_path: Path
) -> None:
    done = _fetch("--from", str(upstream), "--dest", str(tmp_path / "out"))

    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    sums = [f"{folder}/SHA256SUMS" for folder in SUMS_FOLDERS]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != COMPLETE) == sorted(
        [*load_digests(), *sums]
    )
    assert is_complete(out)


def test_a_mirror_file_with_one_byte_changed_is_refused_by_name_and_nothing_is_installed(
    upstream: Path, tmp_path: Path
) -> None:
    mirror = _mirror_copy(upstream, tmp_path / "mirror")
    crd = mirror / "kyverno" / "v1.19.0" / "policies.kyverno.io_mutatingpolicies.yaml"
    crd.write_bytes(crd.read_bytes().replace(b"MutatingPolicy", b"MutatingPolicx", 1))
    (mirror / "dcgm" / "dcgm-field-names.txt").unlink()
    out = tmp_path / "out"
    out.mkdir()

    done = _fetch("--from", str(mirror), "--dest", str(out))

    assert done.returncode == 1
    assert "2 file(s) do not match their recorded digest; nothing installed" in done.stderr
    assert "kyverno/v1.19.0/policies.kyverno.io_mutatingpolicies.yaml: sha256" in done.stderr
    assert "Go module github.com/kyverno/kyverno@v1.19.0" in done.stderr
    assert "dcgm/dcgm-field-names.txt: missing from the mirror" in done.stderr
    assert list(out.iterdir()) == []


def test_without_helm_go_or_pulumi_the_public_path_names_each_and_how_to_get_it(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    for name in ("helm", "go", "pulumi"):
        (tmp_path / name).write_text("")  # not executable: named in the environment, refused as a program
        env[name.upper()] = str(tmp_path / name)

    done = _fetch("--dest", str(tmp_path / "out"), env=env)

    assert done.returncode == 1
    for name in ("helm", "go", "pulumi"):
        assert f"{name} (" in done.stderr
    assert "make upstream UPSTREAM_FROM=<dir>" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_chart_yaml_helm_rewrote_with_the_release_version_matches_the_repositorys() -> None:
    git = b'apiVersion: v2\nname: gpu-operator\nversion: v1.0.0-devel\nappVersion: "main-latest"\nkubeVersion: "1"\n'
    released = yaml.safe_dump({"apiVersion": "v2", "appVersion": "v26.7.0", "kubeVersion": "1",
                               "name": "gpu-operator", "version": "v26.7.0"}).encode()  # fmt: skip
    changed = released.replace(b"gpu-operator", b"gpu-operatr")

    assert digest(git, "chart-yaml") == digest(released, "chart-yaml")
    assert digest(git, "chart-yaml") != digest(changed, "chart-yaml")
    assert digest(git, "yaml") != digest(released, "yaml")


def test_a_schema_a_plugin_stamped_with_its_version_matches_the_repositorys() -> None:
    repo = json.dumps({"name": "command", "resources": {"a": 1}}, indent=4).encode()
    served = json.dumps({"resources": {"a": 1}, "version": "1.2.1", "name": "command"}).encode()

    assert digest(repo, "schema") == digest(served, "schema")
    assert canonical(repo, "bytes") == repo


def test_the_dcgm_field_list_is_every_define_of_the_header_sorted_and_unique() -> None:
    header = b"#define DCGM_FI_DEV_GPU_TEMP 150\n  #  define DCGM_FI_B 2\n#define DCGM_FI_B 2\n#define OTHER 1\n"

    assert dcgm_field_names(header) == b"DCGM_FI_B\nDCGM_FI_DEV_GPU_TEMP\n"


def test_the_kube_state_metric_names_are_the_first_column_of_the_docs_tables(tmp_path: Path) -> None:
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "pod-metrics.md").write_text(
        "| Metric name | Type |\n| --- | --- |\n| kube_pod_info | Gauge |\n| `kube_pod_labels` | Gauge |\n"
        "Text mentioning kube_pod_other is not a row.\n"
    )

    assert kube_state_metric_names(tmp_path) == b"kube_pod_info\nkube_pod_labels\n"


def test_the_recorded_digests_file_is_what_record_writes() -> None:
    data = json.loads(DIGESTS.read_text())
    forms = {entry["form"] for entry in data["files"].values()}

    assert forms == {"bytes", "yaml", "chart-yaml", "schema"}
    assert all(data["files"][s.dest]["form"] == "schema" for s in SOURCES if isinstance(s, PulumiSchema))


@pytest.mark.parametrize("form", ["bytes", "yaml"])
def test_a_digest_is_the_sha256_of_the_canonical_form(form: str) -> None:
    import hashlib

    data = b"a: 1\n"
    assert digest(data, form) == hashlib.sha256(canonical(data, form)).hexdigest()  # type: ignore[arg-type]
