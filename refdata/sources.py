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
- the source trees the e2e tier builds and the Go module proxy does not serve (the GPU Operator's controller, three
  Pulumi providers: e2e/build-cluster.sh, e2e/build-engine.sh), from the commit's source archive on GitHub, every file
  recorded one by one; `SHA256SUMS` beside them is written from the checked files for the build scripts' own check;
- the provider schemas from the provider plugins, with `pulumi package get-schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

# Where `helm pull` finds the GPU Operator chart (NVIDIA's install guide: `helm repo add nvidia <this>`).
NVIDIA_HELM_REPO: Final = "https://helm.ngc.nvidia.com/nvidia"
# GitHub's raw file server: `<base>/<owner>/<repo>/<commit>/<path>`.
GITHUB_RAW: Final = "https://raw.githubusercontent.com"
# GitHub's source archives: `<base>/<owner>/<repo>/tar.gz/<commit>` (where
# github.com/<owner>/<repo>/archive/<commit>.tar.gz redirects), one top folder `<repo>-<commit>/`.
GITHUB_ARCHIVE: Final = "https://codeload.github.com"

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
class GitHubArchive:
    """Files of a repository's tree at a commit, from its source archive, under `dest`.

    Which files: those digests.json lists under `dest` (a build needs a part of the tree; the archive's other files
    are passed over). A file's place under `dest` is its path in the repository, except where `renames` gives the
    path for a place (a file kept beside the tree under another name, e.g. upstream's Makefile for reference).
    `sums` is the folder whose `SHA256SUMS` the build scripts check (`sha256sum -c`, paths `./<under sums>`).
    """

    repo: str
    commit: str
    dest: str
    sums: str
    renames: dict[str, str] = field(default_factory=dict)


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


Source = HelmChart | GoModuleFiles | GitHubFile | GitHubArchive | DcgmFieldNames | KubeStateMetricNames | PulumiSchema

KYVERNO_VERSION: Final = "v1.19.0"
# pulumi/pulumi at v3.259.0 (pulumi-build/README.md: the language host's tag).
PULUMI_LANGUAGE_HOST_COMMIT: Final = "0ac56e876614aedf12771d73ef7e80959b8a6fd4"

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
    # The second tier's sources the Go module proxy does not serve (403), at the tags e2e/ pins: the GPU Operator's
    # controller (e2e/build-cluster.sh) and the providers and language host the engine build compiles
    # (e2e/build-engine.sh, docs/engine.md).
    GitHubArchive(
        "NVIDIA/gpu-operator",
        "10ee5b3638b89e11e949412aafa5ba99279c3721",
        "gpu-operator-src/v26.7.0",
        "gpu-operator-src",
    ),
    # Kubeflow's notebook controller at v1.11.0 (kubeflow/notebooks components/notebook-controller, and the
    # repository's LICENSE): its Notebook CRD, its culler and the controller the e2e tier builds and runs
    # (e2e/build-cluster.sh), whose stop the reclaim policy uses. Its Go module is not served by the proxy; every
    # module its go.mod requires is.
    GitHubArchive(
        "kubeflow/notebooks",
        "3454bb75696a6f76efe0b483fc44f577c9596807",
        "kubeflow-notebooks/v1.11.0",
        "kubeflow-notebooks",
    ),
    # v4.32.0; its root Makefile kept as Makefile.upstream (how upstream regenerates schema.json).
    GitHubArchive(
        "pulumi/pulumi-kubernetes",
        "a03ff6ba58d2f1ea68319dda4b2c982119489c71",
        "pulumi-build/pulumi-kubernetes",
        "pulumi-build",
        {"Makefile.upstream": "Makefile"},
    ),
    # v1.2.1
    GitHubArchive(
        "pulumi/pulumi-command",
        "7f3eb6f3b77cd0fa3895ba437a695dd393f7dd25",
        "pulumi-build/pulumi-command",
        "pulumi-build",
    ),
    # v8.3.0
    GitHubArchive(
        "muhlba91/pulumi-proxmoxve",
        "fb7a0201b341a6ddc5a10bb65a4b85472de00440",
        "pulumi-build/pulumi-proxmoxve",
        "pulumi-build",
    ),
    # RKE2's install script, which the first-boot test runs against https mirrors under a lab CA: at the tag the
    # example stacks pin, and at master as get.rke2.io served it (tests/gpu_failure_domain/test_first_boot.py).
    GitHubFile(
        "rancher/rke2",
        "d1092839cf08cb901b1d40461b0fa6e7ae6f8fc4",
        "install.sh",
        "rke2-install/v1.33.5+rke2r1/install.sh",
    ),
    GitHubFile(
        "rancher/rke2",
        "6ce1a8019e9d0b81eb7a715edbc2b8ac12d26da0",
        "install.sh",
        "rke2-install/main-6ce1a80/install.sh",
    ),
    # The Python language host's main.go at v3.259.0 (pulumi/pulumi's archive is large; three files are needed).
    *(
        GitHubFile(
            "pulumi/pulumi",
            PULUMI_LANGUAGE_HOST_COMMIT,
            path,
            f"pulumi-build/pulumi-language-python/{name}",
        )
        for path, name in (
            ("sdk/python/cmd/pulumi-language-python/main.go", "main.go"),
            ("sdk/python/cmd/pulumi-language-python/go.mod", "go.mod.upstream"),
            ("LICENSE", "LICENSE"),
        )
    ),
)

# The folders whose SHA256SUMS `make upstream` writes (the build scripts check them before building).
SUMS_FOLDERS: Final = ("gpu-operator-src", "kubeflow-notebooks", "pulumi-build")
