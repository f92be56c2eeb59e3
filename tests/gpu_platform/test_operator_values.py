"""The gpu-operator Helm values: one test per trap of the article that the values prevent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from components.gpu_platform.operator_values import build_gpu_operator_values, deep_merge, set_value_paths
from config.chart_values_guard import GUARDED_KEYS
from config.errors import format_validation_error
from config.gpu_operator import GpuOperatorConfig
from knowledge.gpu_operator_chart import CONTROL_PLANE_TOLERATION, GPU_TAINT_TOLERATION
from knowledge.rke2 import RKE2_CONTAINERD_SOCKET, RKE2_NVIDIA_RUNTIMES


def values_for(data: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    cfg = GpuOperatorConfig.model_validate(dict(data or {}))
    arguments: dict[str, Any] = {
        "time_slicing_configmap": "time-slicing-config",
        "default_profile": None,
        "dcgm_metrics_configmap": "dcgm-custom-metrics",
        "dcgm_metrics_digest": "0123456789abcdef",
        "service_monitor": True,
    }
    arguments.update(kwargs)
    return build_gpu_operator_values(cfg, **arguments)


def config_errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        GpuOperatorConfig.model_validate(data)
    return format_validation_error(caught.value)


def toolkit_env(values: Mapping[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in values["toolkit"]["env"]}


def containerd_after_rke2_restart(values: Mapping[str, Any]) -> dict[str, Any]:
    """What RKE2's containerd serves once the toolkit has run and triggered the restart it always triggers.

    The toolkit writes its runtimes and default-runtime setting into a drop-in and adds an `imports` line to
    config.toml (toolkit v1.19.1 config_drop_in.go); RKE2 regenerates config.toml from its template at start
    (rke2-docs advanced.md), dropping the import; its agent then registers the NVIDIA handlers it finds
    itself (k3s pkg/agent/containerd/runtimes.go) and runc stays the default. Only the socket decides
    whether the toolkit reached RKE2's containerd at all.
    """
    env = toolkit_env(values)
    reached = env.get("CONTAINERD_SOCKET") == RKE2_CONTAINERD_SOCKET
    return {"handlers": set(RKE2_NVIDIA_RUNTIMES) if reached else set(), "default": "runc"}


# --- the driver ---------------------------------------------------------------------------------


def test_driver_limits_give_the_kernel_module_compile_4Gi_so_it_is_not_oom_killed_exit_137() -> None:
    assert values_for()["driver"]["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}}


def test_driver_resources_follow_the_config_including_requests() -> None:
    values = values_for(
        {"driverResources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "6Gi"}}}
    )

    assert values["driver"]["resources"] == {
        "limits": {"cpu": "2", "memory": "6Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }


def test_setting_the_driver_memory_keeps_the_default_cpu_limit_and_null_removes_it() -> None:
    kept = values_for({"driverResources": {"limits": {"memory": "8Gi"}}})
    removed = values_for({"driverResources": {"limits": {"memory": "8Gi", "cpu": None}}})

    assert kept["driver"]["resources"] == {"limits": {"cpu": "2", "memory": "8Gi"}}
    assert removed["driver"]["resources"] == {"limits": {"memory": "8Gi"}}


def test_setting_dcgm_exporter_requests_keeps_its_default_memory_limit() -> None:
    values = values_for({"dcgmExporterResources": {"requests": {"cpu": "100m"}}})

    assert values["dcgmExporter"]["resources"] == {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m"}}


def test_driver_requests_above_limits_are_refused_before_kubernetes_refuses_the_pod() -> None:
    messages = config_errors({"driverResources": {"requests": {"memory": "8Gi"}, "limits": {"memory": "4Gi"}}})

    assert "requests.memory (8Gi) is more than limits.memory (4Gi)" in messages[0]


@pytest.mark.parametrize("quantity", ["4GB", "four", "-1Gi", "0", "4 Gi"])
def test_a_memory_limit_that_is_not_a_positive_kubernetes_quantity_is_refused(quantity: str) -> None:
    messages = config_errors({"driverResources": {"limits": {"memory": quantity}}})

    assert messages[0].startswith("gpu-pool:driverResources.limits.memory:")


def test_the_operators_driver_upgrades_have_no_slots_of_their_own_so_they_follow_the_wave() -> None:
    """FIELD-REVIEW-4 WRONG-3: with the chart's 25% the upgrade controller starts a node of its choosing while the
    wave drains another. With none, it upgrades only nodes already cordoned: the one the wave drained. The string:
    the chart renders the value through `| default "25%"`, which takes an integer 0 for empty."""
    policy = values_for()["driver"]["upgradePolicy"]
    assert (policy["autoUpgrade"], policy["maxUnavailable"]) == (True, "0")


def test_the_operators_gpu_pod_deletion_is_as_permissive_and_patient_as_the_waves_drain() -> None:
    """FIELD-REVIEW-5 WRONG-1: with the chart's defaults (deleteEmptyDir false, 300 s) the operator's own pod
    deletion refused a notebook's /dev/shm emptyDir and gave up on a PDB the wave still waited out."""
    from components.gpu_failure_domain.rollout import DRAIN_TIMEOUT

    deletion = values_for()["driver"]["upgradePolicy"]["gpuPodDeletion"]
    assert deletion["deleteEmptyDir"] is True
    assert deletion["timeoutSeconds"] >= int(DRAIN_TIMEOUT.removesuffix("m")) * 60


def test_distro_not_supported_is_avoided_by_building_the_driver_from_source() -> None:
    driver = values_for()["driver"]

    assert driver["usePrecompiled"] is False
    assert driver["kernelModuleType"] == "auto"
    assert driver["version"] == "595.91.07"


def test_precompiled_drivers_need_a_branch_not_a_release() -> None:
    messages = config_errors({"usePrecompiled": True, "driverVersion": "580.173.02"})

    assert "branch such as '580'" in messages[0]


def test_building_from_source_needs_a_full_release_not_a_branch() -> None:
    messages = config_errors({"driverVersion": "580"})

    assert "full version" in messages[0]


def test_precompiled_branch_reaches_the_chart() -> None:
    driver = values_for({"usePrecompiled": True, "driverVersion": "580", "kernelModuleType": "open"})["driver"]

    assert driver == driver | {"usePrecompiled": True, "version": "580", "kernelModuleType": "open"}


# --- the toolkit and runtime --------------------------------------------------------------------


def test_no_runtime_for_nvidia_is_configured_is_avoided_by_pointing_at_rke2s_containerd_socket() -> None:
    assert (
        toolkit_env(values_for())["CONTAINERD_SOCKET"]
        == RKE2_CONTAINERD_SOCKET
        == ("/run/k3s/containerd/containerd.sock")
    )


def test_toolkit_env_sets_only_the_socket_as_rke2_documents_since_nothing_else_survives_rke2s_restart() -> None:
    values = values_for()
    assert values["toolkit"]["env"] == [{"name": "CONTAINERD_SOCKET", "value": RKE2_CONTAINERD_SOCKET}]
    assert containerd_after_rke2_restart(values)["default"] == "runc"


def test_nvml_version_mismatch_is_avoided_by_cdi_so_no_patched_containerd_config_is_needed() -> None:
    assert values_for()["cdi"] == {"enabled": True, "nriPluginEnabled": False}


def test_the_operators_runtime_class_names_a_handler_rke2_registers_itself() -> None:
    values = values_for()
    assert values["operator"]["runtimeClass"] == "nvidia"
    assert values["operator"]["runtimeClass"] in containerd_after_rke2_restart(values)["handlers"]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("containerdConfig", "/var/lib/rancher/rke2/agent/etc/containerd/config.toml", "had no effect"),
        ("setAsDefault", True, "default-runtime"),
        ("runtimeClass", "nvidia-gpu", "handler RKE2 registers"),
    ],
)
def test_toolkit_settings_that_never_worked_on_rke2_are_refused_saying_why(key: str, value: Any, reason: str) -> None:
    (message,) = config_errors({"toolkit": {key: value}})
    assert message.startswith(f"gpu-pool:toolkit.{key}: '{key}' was removed:")
    assert reason in message and "Remove the key" in message


def test_a_relative_containerd_socket_is_refused() -> None:
    assert config_errors({"toolkit": {"containerdSocket": "containerd.sock"}})


@pytest.mark.parametrize("socket", ["/run/containerd/containerd.sock", "/var/run/docker.sock"])
def test_a_containerd_socket_rke2s_kubelet_does_not_use_is_refused_naming_rke2s(socket: str) -> None:
    (message,) = config_errors({"toolkit": {"containerdSocket": socket}})

    assert message.startswith(f"gpu-pool:toolkit.containerdSocket: {socket} is not the containerd RKE2's kubelet uses")
    assert "/run/k3s/containerd/containerd.sock" in message and "remove the key" in message


def test_rke2s_own_socket_is_accepted_with_or_without_a_trailing_slash() -> None:
    cfg = GpuOperatorConfig.model_validate({"toolkit": {"containerdSocket": "/run/k3s/containerd/containerd.sock/"}})

    assert cfg.toolkit.containerd_socket == "/run/k3s/containerd/containerd.sock"


def test_toolkit_env_values_are_strings_as_the_clusterpolicy_requires() -> None:
    for entry in values_for()["toolkit"]["env"]:
        assert isinstance(entry["value"], str), entry


# --- the device plugin and scheduling -----------------------------------------------------------


def test_device_plugin_missing_toleration_is_avoided_by_keeping_the_gpu_taint_toleration() -> None:
    daemonsets = values_for()["daemonsets"]

    assert GPU_TAINT_TOLERATION in daemonsets["tolerations"]
    assert GPU_TAINT_TOLERATION == {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert daemonsets["priorityClassName"] == "system-node-critical"


def test_nfd_master_gets_its_control_plane_toleration_under_the_subcharts_own_key() -> None:
    values = values_for()

    tolerations = values["node-feature-discovery"]["master"]["tolerations"]
    assert CONTROL_PLANE_TOLERATION in tolerations
    assert len(tolerations) == len({tuple(sorted(t.items())) for t in tolerations})
    # The article's `nfd.master` is a key the subchart never reads.
    assert "nfd" not in values


def test_device_plugin_points_at_the_programs_configmap_and_never_creates_its_own() -> None:
    config = values_for(default_profile="a1000-x4")["devicePlugin"]["config"]

    assert config == {"create": False, "name": "time-slicing-config", "default": "a1000-x4"}


def test_without_a_default_profile_unlabelled_nodes_are_not_shared() -> None:
    assert values_for(default_profile=None)["devicePlugin"]["config"]["default"] == ""


@pytest.mark.parametrize("argument", ["time_slicing_configmap", "dcgm_metrics_configmap"])
def test_an_empty_configmap_name_is_refused(argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        empty: dict[str, Any] = {argument: ""}
        values_for(**empty)


# --- telemetry ------------------------------------------------------------------------------------


def test_dcgm_exporter_oom_is_avoided_with_a_1Gi_memory_limit() -> None:
    assert values_for()["dcgmExporter"]["resources"] == {"limits": {"memory": "1Gi"}}


def test_dcgm_exporter_reads_the_custom_metrics_configmap_and_service_monitor_follows_the_flag() -> None:
    with_monitor = values_for(service_monitor=True)["dcgmExporter"]
    without_monitor = values_for(service_monitor=False)["dcgmExporter"]

    assert with_monitor["config"] == {"name": "dcgm-custom-metrics"}
    assert with_monitor["serviceMonitor"] == {"enabled": True}
    assert without_monitor["serviceMonitor"] == {"enabled": False}


# --- operands the A1000 lab does not use ----------------------------------------------------------


@pytest.mark.parametrize(
    "section", ["migManager", "vgpuManager", "vgpuDeviceManager", "sandboxWorkloads", "gds", "gdrcopy", "dcgm"]
)
def test_mig_vgpu_and_other_unused_operands_are_off(section: str) -> None:
    assert values_for()[section] == {"enabled": False}


def test_dead_keys_operator_default_runtime_and_psp_are_never_set() -> None:
    values = values_for()

    assert "defaultRuntime" not in values["operator"]
    assert "psp" not in values


# --- extraValues ----------------------------------------------------------------------------------


def test_extra_values_are_merged_last_without_dropping_sibling_keys() -> None:
    values = values_for({"extraValues": {"driver": {"repository": "registry.lab/nvidia"}, "gfd": {"enabled": False}}})

    assert values["driver"]["repository"] == "registry.lab/nvidia"
    assert values["driver"]["version"] == "595.91.07"
    assert values["gfd"] == {"enabled": False}


def test_extra_values_may_turn_an_unused_operand_back_on() -> None:
    assert values_for({"extraValues": {"migManager": {"enabled": True}}})["migManager"] == {"enabled": True}


@pytest.mark.parametrize("guarded", sorted(GUARDED_KEYS))
def test_extra_values_cannot_override_a_value_set_to_prevent_a_trap(guarded: str) -> None:
    extra: dict[str, Any] = {}
    node = extra
    *parents, leaf = guarded.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = "overridden"

    messages = config_errors({"extraValues": extra})

    assert guarded in messages[0]
    assert GUARDED_KEYS[guarded].trap in messages[0]


def test_extra_values_cannot_override_a_key_below_a_guarded_one() -> None:
    messages = config_errors({"extraValues": {"driver": {"resources": {"limits": {"memory": "512Mi"}}}}})

    assert "'driver.resources.limits.memory' would override driver.resources" in messages[0]
    assert "exit 137" in messages[0]


def test_extra_values_cannot_null_a_whole_section_holding_a_trap_fix() -> None:
    messages = config_errors({"extraValues": {"toolkit": None}})

    assert "toolkit.env" in messages[0]


def test_an_empty_section_in_extra_values_is_harmless() -> None:
    assert values_for({"extraValues": {"driver": {}}}) == values_for()


@pytest.mark.parametrize(
    ("extra", "dead"),
    [
        ({"operator": {"defaultRuntime": "containerd"}}, "operator.defaultRuntime"),
        ({"psp": {"enabled": False}}, "psp"),
        ({"nfd": {"master": {"tolerations": []}}}, "nfd.master"),
        ({"driver": {"useOpenKernelModules": True}}, "driver.useOpenKernelModules"),
    ],
)
def test_extra_values_refuse_dead_keys_that_would_change_nothing(extra: dict[str, Any], dead: str) -> None:
    messages = config_errors({"extraValues": extra})

    assert dead in messages[0]
    assert "does nothing" in messages[0]


def test_extra_values_refuse_an_unknown_section_and_suggest_the_right_one() -> None:
    messages = config_errors({"extraValues": {"devicePlugins": {"enabled": True}}})

    assert messages == [
        "gpu-pool:extraValues: 'devicePlugins' is not a top-level section of the gpu-operator chart values; "
        "did you mean 'devicePlugin'?"
    ]


# --- chart pin and release settings -------------------------------------------------------------


@pytest.mark.parametrize("version", ["latest", "26.3.2", "v26.3", "v26.3.2-rc1", ""])
def test_an_unpinned_or_malformed_chart_version_is_refused(version: str) -> None:
    messages = config_errors({"chartVersion": version})

    assert messages[0].startswith("gpu-pool:chartVersion: must pin an exact chart release as vX.Y.Z")


@pytest.mark.parametrize("url", ["http://helm.ngc.nvidia.com/nvidia", "oci://nvcr.io/nvidia", "helm.ngc.nvidia.com"])
def test_the_chart_repository_must_be_https(url: str) -> None:
    assert "https://" in config_errors({"chartRepository": url})[0]


@pytest.mark.parametrize("namespace", ["GPU-Operator", "gpu_operator", "-gpu", "g" * 64])
def test_the_namespace_must_be_a_dns_label(namespace: str) -> None:
    assert config_errors({"namespace": namespace})[0].startswith("gpu-pool:namespace:")


def test_an_unknown_kernel_module_type_is_refused() -> None:
    assert config_errors({"kernelModuleType": "nouveau"})[0].startswith("gpu-pool:kernelModuleType:")


def test_a_misspelt_key_is_refused_with_a_suggestion() -> None:
    assert "did you mean 'driverVersion'?" in config_errors({"driverversion": "580.173.02"})[0]


# --- purity -------------------------------------------------------------------------------------


def test_the_same_config_gives_the_same_values_and_the_result_shares_nothing_with_the_config() -> None:
    cfg = GpuOperatorConfig.model_validate({"extraValues": {"driver": {"env": [{"name": "A", "value": "1"}]}}})
    arguments: dict[str, Any] = {
        "time_slicing_configmap": "time-slicing-config",
        "default_profile": "a1000-x4",
        "dcgm_metrics_configmap": "dcgm-custom-metrics",
        "dcgm_metrics_digest": "0123456789abcdef",
        "service_monitor": False,
    }

    first = build_gpu_operator_values(cfg, **arguments)
    first["driver"]["env"].append({"name": "B", "value": "2"})
    second = build_gpu_operator_values(cfg, **arguments)

    assert cfg.extra_values == {"driver": {"env": [{"name": "A", "value": "1"}]}}
    assert second["driver"]["env"] == [{"name": "A", "value": "1"}]


def test_every_guarded_key_is_one_the_builder_really_sets() -> None:
    paths = set_value_paths(values_for())

    for guarded in GUARDED_KEYS:
        assert any(path == guarded or path.startswith(guarded + ".") for path in paths), guarded


def test_set_value_paths_counts_a_list_as_its_own_path() -> None:
    assert set_value_paths({"a": {"b": [1, 2], "c": {"d": None}}, "e": {}}) == ["a.b", "a.c.d", "e"]


def test_deep_merge_replaces_lists_like_helm_and_merges_mappings() -> None:
    base = {"a": {"list": [1, 2], "keep": True}}

    assert deep_merge(base, {"a": {"list": [3]}}) == {"a": {"list": [3], "keep": True}}
    assert base == {"a": {"list": [1, 2], "keep": True}}
