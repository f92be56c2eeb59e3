"""The two stacks the e2e tier runs: prod as committed, and one that turns on what prod leaves off."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.shared.node_marking import GpuNodeMarking
from components.stack_check import validate_stack
from config.stack import StackConfig
from offline import preview
from offline.runner import PROJECT, ROOT_DIR, read_stack_file
from tests.ssh_keys import TEST_PUBLIC_KEY

OPTIONS_STACK = "e2e-options"
# Custom marking: the node label, the taint and everything steered by them must follow the config, not the
# article's defaults.
OPTIONS_LABEL = ("gpu.example.com/pool", "a1000")
OPTIONS_TAINT = ("gpu.example.com/dedicated", "gpu-pool", "NoExecute")


def options_config(prod: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """prod's config with every optional feature prod leaves at its default changed or switched on."""
    config = copy.deepcopy(prod)
    key = f"{PROJECT}:"
    config[key + "kubernetes"] = {"kubeconfig": str(kubeconfig), "context": "e2e"}
    config[key + "sharingProfiles"]["a1000-x2"] = {"replicas": 2}
    domains = config[key + "failureDomains"]
    domains[0]["kernel"] = "6.8.0-60-generic"
    domains[0]["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    domains[1]["sharing"] = "a1000-x2"
    config[key + "kyverno"] = {
        "policyName": "gpu-workloads-to-gpu-workers",
        "gpuNodeLabelKey": OPTIONS_LABEL[0],
        "gpuNodeLabelValue": OPTIONS_LABEL[1],
        "taintKey": OPTIONS_TAINT[0],
        "taintValue": OPTIONS_TAINT[1],
        "taintEffect": OPTIONS_TAINT[2],
        "excludedNamespaces": ["kube-system", "cattle-system", "longhorn-system"],
        "failurePolicy": "Ignore",
        "webhookTimeoutSeconds": 5,
        # The options stack keeps the ClusterPolicies (Kyverno < 1.17), so both policy APIs reach the server.
        "policyApi": "clusterpolicy",
    }
    config[key + "gpuQuotas"] = {
        "quotaName": "gpu-cap",
        "failurePolicy": "Ignore",
        "namespaces": {"katib-sweeps": 2, "research": 4, "interns": 0},
        "selectors": [
            {
                "name": "kubeflow-profiles",
                "matchLabels": {"app.kubernetes.io/part-of": "kubeflow-profile"},
                "maxGpus": 2,
            },
            {
                "name": "research-teams",
                "matchLabels": {"team-type": "research", "example.com/tier": "gold"},
                "maxGpus": 4,
            },
            {"name": "students", "matchLabels": {"team-type": "student"}, "maxGpus": 0},
        ],
    }
    config[key + "monitoring"] = {
        "dashboardNamespace": "grafana-dashboards",
        "dashboardLabels": {"grafana_dashboard": "1", "example.com/team": "ml-platform"},
        "rulesNamespace": "monitoring",
        "ruleLabels": {"release": "kube-prometheus-stack", "role": "alert-rules"},
        "runbookBaseUrl": "https://runbooks.example.com/gpu-pool",
        "dcgmExporterJob": "dcgm-exporter",
        "thresholds": {"gpuTemperatureCelsius": 80, "framebufferUsedRatio": 0.9, "idleGpuHours": 12},
    }
    config[key + "gpuOperator"] |= {
        "namespace": "nvidia-gpu-operator",
        "kernelModuleType": "open",
        "driverResources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "6Gi"}},
        "dcgmExporterResources": {"requests": {"memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # Operands gpu-pool does not set: an extra value there must reach the chart unchanged.
        "extraValues": {
            "nodeStatusExporter": {"enabled": True},
            "validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}},
            # The alerts' job (monitoring.dcgmExporterJob) is the one the ServiceMonitor's relabeling writes.
            "dcgmExporter": {
                "serviceMonitor": {
                    "relabelings": [{"action": "replace", "targetLabel": "job", "replacement": "dcgm-exporter"}]
                }
            },
        },
    }
    config[key + "smokeTest"] = {"namespace": "gpu-smoke", "timeoutSeconds": 900, "gpuReadyTimeoutMinutes": 60}
    config[key + "repair"] = {"maxPerDay": 3, "healthCheck": {"enabled": True, "schedule": "*/5 * * * *"}}
    return config


@dataclass(frozen=True)
class Previewed:
    """One stack's offline preview: its validated config, plan.json and manifests."""

    name: str
    config: StackConfig
    out: Path

    @property
    def plan(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.out / "plan.json").read_text())
        return document

    def manifests(self) -> list[Path]:
        return sorted((self.out / "manifests").glob("*.yaml"))

    def resource(self, name: str) -> dict[str, Any]:
        """A resource of plan.json by its Pulumi name, e.g. `dc1-node-ready`."""
        found: list[dict[str, Any]] = [r for r in self.plan["resources"] if r["name"] == name]
        assert len(found) == 1, f"{self.name}: {len(found)} resources named {name!r}"
        return found[0]

    @property
    def marking(self) -> GpuNodeMarking:
        return GpuNodeMarking.from_kyverno(self.config.kyverno)


def run_preview(name: str, raw: dict[str, Any], work: Path, *, stack_dir: Path | None = None) -> Previewed:
    """`python -m offline.preview` of a stack file: the project's own, or `raw` written to `work` if none given."""
    args = ["--stack", name, "--out", str(work / "preview"), "--quiet"]
    if stack_dir is None:
        stack_dir = work / "stack"
        stack_dir.mkdir(parents=True, exist_ok=True)
        (stack_dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": raw}, sort_keys=False))
        args += ["--stack-dir", str(stack_dir)]
    code = preview.main(args)
    assert code == 0, f"offline preview of {name} failed with exit code {code}"
    short = {key.removeprefix(f"{PROJECT}:"): value for key, value in raw.items()}
    return Previewed(name, validate_stack(short), work / "preview")


def preview_prod(work: Path) -> Previewed:
    return run_preview("prod", read_stack_file("prod"), work, stack_dir=ROOT_DIR)


def preview_clusterpolicy(work: Path) -> Previewed:
    raw = read_stack_file("prod")
    raw[f"{PROJECT}:kyverno"] = {**raw.get(f"{PROJECT}:kyverno", {}), "policyApi": "clusterpolicy"}
    return run_preview("prod-clusterpolicy", raw, work)


def preview_options(work: Path, kubeconfig: Path) -> Previewed:
    return run_preview(OPTIONS_STACK, options_config(read_stack_file("prod"), kubeconfig), work)
