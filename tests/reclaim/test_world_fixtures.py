"""The reclaim tests' Notebooks are what Kubeflow's API accepts: each shape the tests build, validated strictly against
the Notebook CRD of kubeflow/notebooks v1.11.0 (the upstream reference data), as the API server would."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.contract.crd_schemas import strict_validator
from tests.day2.k8s_objects import NOW
from tests.reclaim.world import notebook, stopped_by_policy, warned

NOTEBOOK_CRD = "kubeflow-notebooks/v1.11.0/components/notebook-controller/config/crd/bases/kubeflow.org_notebooks.yaml"


@pytest.mark.parametrize(
    "made",
    [
        notebook("team-a", "resnet"),
        notebook("team-a", "cpu-only", gpus=0),
        notebook("team-a", "kept", labels={"gpu-pool.dev/keep-gpu": "true"}),
        notebook("team-a", "warned", annotations=warned(NOW, NOW + timedelta(hours=1))),
        notebook("team-a", "stopped", annotations=stopped_by_policy(NOW, "stopped-0", "rke2-worker-dc3-gpu-a")),
    ],
    ids=["gpu", "cpu-only", "excluded", "warned", "stopped"],
)
def test_each_notebook_the_tests_build_fits_kubeflows_notebook_crd(upstream: Path, made: dict[str, object]) -> None:
    strict_validator(upstream, NOTEBOOK_CRD, "v1").validate(made)
