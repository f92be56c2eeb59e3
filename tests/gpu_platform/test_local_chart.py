"""`gpuOperator.chart`: the chart from disk, its CRDs registered by the program, refused at preview when wrong."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from config.chart_source import read_local_chart
from offline.recording import Recording
from tests.chart_archive import package_chart
from tests.config.refusal import refused

Run = Callable[..., Recording]
P = "gpu-platform"
OPERATOR = "gpu-pool:gpuOperator"
V26_7_CRDS = {
    "clusterpolicies.nvidia.com",
    "nvidiadrivers.nvidia.com",
    "gpuclusters.nvidia.com",
    "computedomains.resource.nvidia.com",
    "computedomaincliques.resource.nvidia.com",
}
NFD_CRDS = {"nodefeatures.nfd.k8s-sigs.io", "nodefeaturegroups.nfd.k8s-sigs.io", "nodefeaturerules.nfd.k8s-sigs.io"}


@pytest.fixture
def archive_v26_7(upstream: Path, tmp_path: Path) -> Path:
    return package_chart(upstream / "gpu-operator" / "v26.7.0" / "chart", "v26.7.0", tmp_path)


def crd_resources(recording: Recording) -> dict[str, Any]:
    return {
        r.inputs["metadata"]["name"]: r
        for r in recording.registrations
        if r.type == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    }


def test_a_chart_archive_on_disk_is_installed_from_disk_with_every_crd_registered_before_it(
    run_stack_program: Run, prod_config, archive_v26_7: Path
):
    prod_config[OPERATOR]["chart"] = str(archive_v26_7)
    recording = run_stack_program(prod_config)
    release = recording.named(f"{P}-gpu-operator")
    assert release.inputs["chart"] == str(archive_v26_7)
    assert "repositoryOpts" not in release.inputs
    assert release.inputs["skipCrds"] is True
    crds = crd_resources(recording)
    assert set(crds) == V26_7_CRDS | NFD_CRDS
    assert all(recording.urn_of(r.name) in release.dependencies for r in crds.values())


def test_with_the_crds_registered_the_charts_crd_upgrade_hook_is_off(
    run_stack_program: Run, prod_config, archive_v26_7: Path
):
    prod_config[OPERATOR]["chart"] = str(archive_v26_7)
    local = run_stack_program(prod_config).named(f"{P}-gpu-operator").inputs["values"]["operator"]
    assert local["upgradeCRD"] is False


def test_without_a_chart_on_disk_the_charts_own_crd_upgrade_hook_stays_on(run_stack_program: Run, prod_config):
    remote = run_stack_program(prod_config).named(f"{P}-gpu-operator").inputs["values"]["operator"]
    assert remote["upgradeCRD"] is True


def test_a_remote_chart_registers_no_crd_resources(run_stack_program: Run, prod_config):
    assert crd_resources(run_stack_program(prod_config)) == {}


def test_the_crds_are_the_charts_own_files_unchanged(run_stack_program: Run, prod_config, archive_v26_7: Path):
    prod_config[OPERATOR]["chart"] = str(archive_v26_7)
    registered = crd_resources(run_stack_program(prod_config))["clusterpolicies.nvidia.com"].inputs
    (expected,) = [
        c for c in read_local_chart(archive_v26_7).crds() if c["metadata"]["name"] == registered["metadata"]["name"]
    ]
    assert registered["spec"] == expected["spec"]
    # Adopting CRDs Helm created needs forced server-side apply (tests/e2e/test_gpu_operator_upgrade.py).
    assert registered["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"


def test_a_crd_leaving_the_plan_is_kept_in_the_cluster_because_deleting_it_deletes_every_clusterpolicy(
    run_stack_program: Run, prod_config, archive_v26_7: Path
):
    prod_config[OPERATOR]["chart"] = str(archive_v26_7)
    crds = crd_resources(run_stack_program(prod_config))
    assert all(r.retain_on_delete for r in crds.values())


def test_nfd_turned_off_leaves_its_crds_out(run_stack_program: Run, prod_config, archive_v26_7: Path):
    prod_config[OPERATOR].update({"chart": str(archive_v26_7), "extraValues": {"nfd": {"enabled": False}}})
    assert set(crd_resources(run_stack_program(prod_config))) == V26_7_CRDS


def test_the_charts_git_directory_is_refused_with_the_helm_package_command(
    run_stack_program: Run, prod_config, monitor, upstream: Path
):
    prod_config[OPERATOR]["chart"] = str(upstream / "gpu-operator" / "v26.7.0" / "chart")
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:gpuOperator.chart" in message and "v1.0.0-devel" in message
    assert "helm package --version v26.7.0 --app-version v26.7.0" in message


def test_an_archive_of_another_version_is_refused_naming_both(
    run_stack_program: Run, prod_config, monitor, upstream: Path, tmp_path: Path
):
    older = package_chart(upstream / "gpu-operator" / "v26.3.2" / "chart", "v26.3.2", tmp_path)
    prod_config[OPERATOR]["chart"] = str(older)
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:gpuOperator.chart" in message
    assert "gpu-operator v26.3.2, not the pinned chartVersion v26.7.0" in message


def test_a_missing_chart_is_refused(run_stack_program: Run, prod_config, monitor, tmp_path: Path):
    prod_config[OPERATOR]["chart"] = str(tmp_path / "gpu-operator-v26.7.0.tgz")
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:gpuOperator.chart" in message and "does not exist" in message


def test_a_file_that_is_not_a_chart_archive_is_refused(run_stack_program: Run, prod_config, monitor, tmp_path: Path):
    bogus = tmp_path / "gpu-operator-v26.7.0.tgz"
    bogus.write_text("<html>404</html>")
    prod_config[OPERATOR]["chart"] = str(bogus)
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:gpuOperator.chart" in message and "not a gzipped tar archive" in message
