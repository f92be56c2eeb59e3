"""Every upstream file the contract tests read, declared once: its place under the data folder and its public source.

The data folder keeps the layout of this build machine's `../shared/upstream` (a mirror of the same files), so a
test reads `<dir>/gpu-operator/v26.7.0/chart/values.yaml` whichever way the folder was filled. What each file must
hold is recorded in `digests.json` beside this file (written by `python -m refdata.fetch --record`).

Public sources, by kind:
- the GPU Operator chart archives from NVIDIA's Helm repository, with `helm pull` (the archive NVIDIA publishes is
  `helm package --version <tag> --app-version <tag> deployments/gpu-operator` of the tag's tree);
- files of Go modules the Go module proxy serves (Kyverno's CRDs, the Prometheus Operator's PrometheusRule CRD,
  kube-state-metrics' metric docs), with `go mod download`, which also checks each module against Go's checksum
  database;
- files of GitHub repositories the proxy does not serve, at a pinned commit, over HTTPS;
- the provider schemas from the provider plugins, with `pulumi package get-schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

# Where `helm pull` finds the GPU Operator chart (NVIDIA's install guide: `helm repo add nvidia <this>`).
NVIDIA_HELM_REPO: Final = "https://helm.ngc.nvidia.com/nvidia"
# GitHub's raw file server: `<base>/<owner>/<repo>/<commit>/<path>`.
GITHUB_RAW: Final = "https://raw.githubusercontent.com"

# How a file is compared with its recorded digest:
# - bytes: the file as it is;
# - yaml: the parsed document (Helm writes Chart.yaml and Chart.lock itself when it packages a chart, so their
#   formatting is Helm's, not the repository's); for a chart's own Chart.yaml without `version` and `appVersion`,
#   which the release stamps (in git they say v1.0.0-devel / main-latest);
# - schema: the parsed JSON without `version` (a plugin answers `get-schema` with its schema re-serialised and
#   stamped with its own version; the repository's schema.json has neither).
Form = Literal["bytes", "yaml", "chart-yaml", "schema"]


@dataclass(frozen=True)
class HelmChart:
    """A chart archive, unpacked under `dest`."""

    name: str
    version: str
    dest: str


@dataclass(frozen=True)
class GoModuleFiles:
    """Files of a module the Go module proxy serves: path in the module -> place in the data folder."""

    module: str
    version: str
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GitHubFile:
    """One file of a public GitHub repository at a commit."""

    repo: str
    commit: str
    path: str
    dest: str


@dataclass(frozen=True)
class DcgmFieldNames:
    """Every `DCGM_FI_*` identifier `dcgmlib/dcgm_fields.h` defines, one a line, sorted (aliases included)."""

    header: GitHubFile
    dest: str


@dataclass(frozen=True)
class KubeStateMetricNames:
    """Every metric name in the first column of the tables in kube-state-metrics' `docs/metrics/**/*.md`."""

    module: str
    version: str
    dest: str


@dataclass(frozen=True)
class PulumiSchema:
    """A provider plugin's schema, as `pulumi package get-schema <name>@<version>` prints it."""

    name: str
    version: str
    dest: str


Source = HelmChart | GoModuleFiles | GitHubFile | DcgmFieldNames | KubeStateMetricNames | PulumiSchema

KYVERNO_VERSION: Final = "v1.19.0"

SOURCES: Final[tuple[Source, ...]] = (
    # The two chart versions the program supports (the 26.3 line deprecated, 26.7 supported): values, CRDs,
    # templates, the NFD subchart; tests package them as NVIDIA does and render them.
    HelmChart("gpu-operator", "v26.3.2", "gpu-operator/v26.3.2/chart"),
    HelmChart("gpu-operator", "v26.7.0", "gpu-operator/v26.7.0/chart"),
    # NVIDIA's documented time-slicing ConfigMaps (cloud-native-docs gpu-operator/manifests/input/).
    GitHubFile(
        "NVIDIA/cloud-native-docs",
        "52dcb7b8d956784344e241df476de17094a4574c",
        "gpu-operator/manifests/input/time-slicing-config-all.yaml",
        "gpu-operator/docs-examples/time-slicing-config-all.yaml",
    ),
    GitHubFile(
        "NVIDIA/cloud-native-docs",
        "52dcb7b8d956784344e241df476de17094a4574c",
        "gpu-operator/manifests/input/time-slicing-config-fine.yaml",
        "gpu-operator/docs-examples/time-slicing-config-fine.yaml",
    ),
    # The CRDs the e2e tier installs and the contract validates policies against: Kyverno's release the tier's
    # CRDs come from, the Prometheus Operator's PrometheusRule.
    GoModuleFiles(
        "github.com/kyverno/kyverno",
        KYVERNO_VERSION,
        {
            "config/crds/kyverno/kyverno.io_clusterpolicies.yaml": (
                f"kyverno/{KYVERNO_VERSION}/kyverno.io_clusterpolicies.yaml"
            ),
            **{
                f"config/crds/policies.kyverno.io/policies.kyverno.io_{kind}policies.yaml": (
                    f"kyverno/{KYVERNO_VERSION}/policies.kyverno.io_{kind}policies.yaml"
                )
                for kind in ("mutating", "generating", "validating")
            },
        },
    ),
    GoModuleFiles(
        "github.com/prometheus-operator/prometheus-operator",
        "v0.93.0",
        {
            "example/prometheus-operator-crd-full/monitoring.coreos.com_prometheusrules.yaml": (
                "prometheus-operator/v0.93.0/monitoring.coreos.com_prometheusrules.yaml"
            )
        },
    ),
    # The exporter's default counter files at the release GPU Operator v26.3.2 ships (4.5.3-4.8.2).
    GitHubFile(
        "NVIDIA/dcgm-exporter",
        "691c92762eb551313c825f6efe4ceeee20982801",
        "etc/default-counters.csv",
        "dcgm-exporter/default-counters.csv",
    ),
    GitHubFile(
        "NVIDIA/dcgm-exporter",
        "691c92762eb551313c825f6efe4ceeee20982801",
        "etc/dcp-metrics-included.csv",
        "dcgm-exporter/dcp-metrics-included.csv",
    ),
    DcgmFieldNames(
        GitHubFile("NVIDIA/DCGM", "72fa3feaa67d716a75323a8f47c34ff3ee73f824", "dcgmlib/dcgm_fields.h", ""),
        "dcgm/dcgm-field-names.txt",
    ),
    KubeStateMetricNames("k8s.io/kube-state-metrics/v2", "v2.20.0", "kube-state-metrics/metric-names.txt"),
    # The schemas of the two bridged providers the replace table is checked against (pulumi-kubernetes has no
    # replace marks in its schema: knowledge/replacements.py).
    PulumiSchema("proxmoxve", "8.3.0", "pulumi-schemas/proxmoxve/8.3.0/schema.json"),
    PulumiSchema("command", "1.2.1", "pulumi-schemas/command/1.2.1/schema.json"),
)
