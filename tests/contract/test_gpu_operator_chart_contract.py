"""The values we send match the pinned gpu-operator chart (upstream values.yaml, NFD subchart, CRD)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the dev group
import pytest
import yaml

from components.gpu_platform.operator_values import build_gpu_operator_values, set_value_paths
from components.gpu_platform.time_slicing import build_time_slicing_config
from config.gpu_operator import GpuOperatorConfig
from config.sharing import SharingProfile
from knowledge.driver_matrix import RECOMMENDED_DRIVERS, supported_drivers
from knowledge.gpu_operator_chart import (
    DAEMONSETS_DEFAULT_TOLERATIONS,
    DEAD_KEYS,
    KNOWN_CHART_SECTIONS,
    NFD_MASTER_DEFAULT_TOLERATIONS,
    OPERATOR_DEPLOYMENT,
    OPERATOR_POD_SELECTOR,
    SECTIONS_SINCE,
    TEMPLATE_ONLY_KEYS,
)

NFD_PREFIX = "node-feature-discovery."
# Options our profiles carry that NVIDIA's time-slicing examples leave at their defaults.
TIME_SLICING_EXTRA_OPTIONS = {"sharing.timeSlicing.renameByDefault", "sharing.timeSlicing.failRequestsGreaterThanOne"}
_MISSING = object()


# Both supported chart lines: 26.7 (the default) and 26.3 (deprecated upstream, still accepted for stacks pinned there).
CHARTS = ("v26.3.2", "v26.7.0")


@pytest.fixture(scope="module", params=CHARTS)
def config(request: pytest.FixtureRequest) -> GpuOperatorConfig:
    """Every default, on each chart with NVIDIA's recommended driver for it."""
    version = str(request.param)
    return GpuOperatorConfig.model_validate({"chartVersion": version, "driverVersion": RECOMMENDED_DRIVERS[version]})


@pytest.fixture(scope="module")
def values(config: GpuOperatorConfig) -> dict[str, Any]:
    return build_gpu_operator_values(
        config,
        time_slicing_configmap="time-slicing-config",
        default_profile=None,
        dcgm_metrics_configmap="dcgm-custom-metrics",
        dcgm_metrics_digest="0123456789abcdef",
        service_monitor=True,
    )


@pytest.fixture(scope="module")
def chart_dir(upstream: Path, config: GpuOperatorConfig) -> Path:
    path = upstream / "gpu-operator" / config.chart_version / "chart"
    assert path.is_dir(), f"no upstream data for the pinned chart {config.chart_version}"
    return path


@pytest.fixture(scope="module")
def chart_values(chart_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((chart_dir / "values.yaml").read_text())
    return loaded


@pytest.fixture(scope="module")
def nfd_values(chart_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (chart_dir / "charts" / "node-feature-discovery" / "values.yaml").read_text()
    )
    return loaded


@pytest.fixture(scope="module")
def clusterpolicy_spec_schema(chart_dir: Path) -> dict[str, Any]:
    crd = yaml.safe_load((chart_dir / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def lookup(tree: Any, path: str) -> Any:
    node = tree
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def open_map_ancestor(tree: Mapping[str, Any], path: str) -> str | None:
    """The nearest ancestor the chart declares as an open map (`resources: {}`), if any."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        ancestor = ".".join(parts[:cut])
        found = lookup(tree, ancestor)
        if found is not _MISSING:
            return ancestor if found == {} else None
    return None


def kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list):
        return "list"
    return "scalar"


def key_paths(tree: Any, prefix: str = "") -> Iterator[str]:
    """Every key path of a document; list items are descended into as `path[]`."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from key_paths(value, path)
    elif isinstance(tree, list):
        for item in tree:
            yield from key_paths(item, f"{prefix}[]")


def problems_with_paths(
    values: Mapping[str, Any], chart_values: Mapping[str, Any], nfd_values: Mapping[str, Any]
) -> list[str]:
    problems: list[str] = []
    for path in set_value_paths(values):
        if path in TEMPLATE_ONLY_KEYS:
            continue
        ours = lookup(values, path)
        if path.startswith(NFD_PREFIX):
            tree, checked, where = nfd_values, path[len(NFD_PREFIX) :], "the NFD subchart values.yaml"
        else:
            tree, checked, where = chart_values, path, "the chart values.yaml"
        theirs = lookup(tree, checked)
        if theirs is _MISSING:
            if open_map_ancestor(tree, checked) is None:
                problems.append(f"{path} is not in {where} and not a documented template-only key")
            continue
        if kind(theirs) != kind(ours):
            problems.append(f"{path} is a {kind(ours)} here but a {kind(theirs)} in {where}")
        elif isinstance(theirs, bool) and not isinstance(ours, bool):
            problems.append(f"{path} is a boolean in {where} but {ours!r} here")
    return problems


def test_every_value_we_set_is_a_key_of_the_pinned_chart_with_the_same_kind(
    values: dict[str, Any], chart_values: dict[str, Any], nfd_values: dict[str, Any]
) -> None:
    assert problems_with_paths(values, chart_values, nfd_values) == []


def test_the_path_check_catches_a_misspelt_key_and_a_wrong_kind(
    chart_values: dict[str, Any], nfd_values: dict[str, Any]
) -> None:
    wrong = {"devicePlugin": {"config": {"nmae": "x"}}, "daemonsets": {"tolerations": {"key": "x"}}}

    assert len(problems_with_paths(wrong, chart_values, nfd_values)) == 2


def test_template_only_keys_are_absent_from_values_yaml_but_read_by_the_clusterpolicy(
    chart_values: dict[str, Any], clusterpolicy_spec_schema: dict[str, Any]
) -> None:
    for path in TEMPLATE_ONLY_KEYS:
        assert lookup(chart_values, path) is _MISSING, f"{path} is in values.yaml: drop it from TEMPLATE_ONLY_KEYS"
        node: Any = clusterpolicy_spec_schema
        for part in path.split("."):
            assert part in node.get("properties", {}), f"{path} is not a ClusterPolicy spec field"
            node = node["properties"][part]


def test_known_chart_sections_are_exactly_the_pinned_charts_top_level_keys(
    config: GpuOperatorConfig, chart_values: dict[str, Any]
) -> None:
    newer = {s for s, since in SECTIONS_SINCE.items() if since > config.chart_version}
    assert set(KNOWN_CHART_SECTIONS) - newer == set(chart_values)
    assert len(KNOWN_CHART_SECTIONS) == len(set(KNOWN_CHART_SECTIONS))


def test_the_charts_crd_upgrade_hook_is_the_switch_we_turn_off_when_the_crds_are_resources(
    chart_dir: Path, chart_values: dict[str, Any]
) -> None:
    """templates/upgrade_crd.yaml runs only with operator.upgradeCRD, whose default is on."""
    hook = (chart_dir / "templates" / "upgrade_crd.yaml").read_text(encoding="utf-8")
    assert hook.startswith("{{- if .Values.operator.upgradeCRD }}")
    assert chart_values["operator"]["upgradeCRD"] is True


def test_the_crds_we_register_are_every_crd_of_the_chart_folder(chart_dir: Path, config: GpuOperatorConfig) -> None:
    from components.gpu_platform.operator_crds import build_operator_crds
    from config.chart_source import read_local_chart

    chart = read_local_chart(chart_dir)
    names = {c["metadata"]["name"] for c in build_operator_crds(chart, nfd_enabled=True)}
    in_folder = {
        d["metadata"]["name"]
        for f in sorted(chart_dir.glob("**/crds/*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d and d.get("kind") == "CustomResourceDefinition"
    }
    assert names == in_folder and "clusterpolicies.nvidia.com" in names


def test_dead_keys_are_really_absent_from_the_pinned_chart(
    values: dict[str, Any], chart_values: dict[str, Any]
) -> None:
    for dead in DEAD_KEYS:
        assert lookup(chart_values, dead) is _MISSING, dead
        assert lookup(values, dead) is _MISSING, dead


def test_the_chart_default_gpu_toleration_is_kept_since_helm_replaces_lists(
    values: dict[str, Any], chart_values: dict[str, Any]
) -> None:
    chart_default = chart_values["daemonsets"]["tolerations"]

    assert [dict(t) for t in DAEMONSETS_DEFAULT_TOLERATIONS] == chart_default
    for toleration in chart_default:
        assert toleration in values["daemonsets"]["tolerations"]


def test_the_nfd_subchart_default_master_tolerations_are_kept_since_helm_replaces_lists(
    values: dict[str, Any], chart_values: dict[str, Any], nfd_values: dict[str, Any]
) -> None:
    subchart_default = nfd_values["master"]["tolerations"]
    # The parent chart does not override the subchart's master tolerations, so these are the defaults.
    assert lookup(chart_values, "node-feature-discovery.master.tolerations") is _MISSING

    assert [dict(t) for t in NFD_MASTER_DEFAULT_TOLERATIONS] == subchart_default
    for toleration in subchart_default:
        assert toleration in values["node-feature-discovery"]["master"]["tolerations"]


def test_the_values_the_chart_copies_into_the_clusterpolicy_satisfy_its_crd_schema(
    values: dict[str, Any], clusterpolicy_spec_schema: dict[str, Any]
) -> None:
    properties = clusterpolicy_spec_schema["properties"]
    checked = [section for section in values if section in properties]

    assert {"driver", "toolkit", "devicePlugin", "dcgmExporter", "daemonsets", "cdi"} <= set(checked)
    for section in checked:
        jsonschema.Draft7Validator(properties[section]).validate(values[section])


def test_the_charts_own_default_driver_is_in_our_supported_list(
    config: GpuOperatorConfig, chart_values: dict[str, Any]
) -> None:
    drivers = supported_drivers(config.chart_version)

    assert drivers is not None
    assert chart_values["driver"]["version"] in drivers


@pytest.mark.parametrize("example", ["time-slicing-config-all.yaml", "time-slicing-config-fine.yaml"])
def test_time_slicing_profiles_have_the_structure_of_nvidias_documented_examples(upstream: Path, example: str) -> None:
    configmap = yaml.safe_load((upstream / "gpu-operator" / "docs-examples" / example).read_text())
    ours = set(key_paths(yaml.safe_load(build_time_slicing_config({"p": SharingProfile(replicas=4)})["p"])))

    for name, document in configmap["data"].items():
        theirs = set(key_paths(yaml.safe_load(document)))
        assert theirs <= ours, f"{example}:{name} has keys we do not emit: {sorted(theirs - ours)}"
        assert ours - theirs <= TIME_SLICING_EXTRA_OPTIONS, f"{example}:{name}: {sorted(ours - theirs)}"


def test_a_whole_card_profile_has_the_structure_of_the_examples_minus_sharing(upstream: Path) -> None:
    configmap = yaml.safe_load(
        (upstream / "gpu-operator" / "docs-examples" / "time-slicing-config-all.yaml").read_text()
    )
    whole = set(key_paths(yaml.safe_load(build_time_slicing_config({"w": SharingProfile(replicas=1)})["w"])))

    for document in configmap["data"].values():
        theirs = {path for path in key_paths(yaml.safe_load(document)) if not path.startswith("sharing")}
        assert whole == theirs


def test_the_operator_wait_names_the_deployment_and_pod_label_the_chart_really_creates(chart_dir: Path) -> None:
    """templates/operator.yaml: a renamed Deployment would make the wait time out on a healthy operator."""
    template = (chart_dir / "templates" / "operator.yaml").read_text(encoding="utf-8")
    head = template.split("spec:", 1)[0]
    assert "kind: Deployment" in head and f"name: {OPERATOR_DEPLOYMENT}\n" in head
    key, value = OPERATOR_POD_SELECTOR.split("=")
    pod_template = template.split("template:", 1)[1].split("spec:", 1)[0]
    assert f'{key}: "{value}"' in pod_template


def test_the_gpu_pod_deletion_we_set_reaches_the_clusterpolicys_pod_deletion_and_satisfies_its_crd(
    chart_dir: Path, values: dict[str, Any], clusterpolicy_spec_schema: dict[str, Any]
) -> None:
    """FIELD-REVIEW-5 WRONG-1's fix, checked against the pinned chart: the template copies
    driver.upgradePolicy.gpuPodDeletion into the ClusterPolicy's upgradePolicy.podDeletion, which is what
    k8s-operator-libs' SchedulePodEviction reads (DeleteEmptyDir, TimeoutSecond)."""
    template = (chart_dir / "templates" / "clusterpolicy.yaml").read_text()
    for key in ("timeoutSeconds", "deleteEmptyDir"):
        assert f"{key}: {{{{ .Values.driver.upgradePolicy.gpuPodDeletion.{key}" in template
    policy = clusterpolicy_spec_schema["properties"]["driver"]["properties"]["upgradePolicy"]["properties"]
    schema = policy["podDeletion"]
    ours = values["driver"]["upgradePolicy"]["gpuPodDeletion"]

    jsonschema.Draft7Validator(schema).validate(ours)
    assert schema["properties"]["deleteEmptyDir"]["type"] == "boolean" and ours["deleteEmptyDir"] is True
    assert schema["properties"]["timeoutSeconds"]["type"] == "integer"
    assert ours["timeoutSeconds"] > schema["properties"]["timeoutSeconds"]["default"]
