"""Upstream programs a lab runs in its cluster, run here out of cluster against the e2e control plane, as their own
developers run them: Kyverno's admission and background controllers, and the NVIDIA GPU Operator's controller.

Each runs as the container its own chart declares: the Deployment the chart renders (Kyverno's chart from the pinned
module, or the gpu-operator Deployment `pulumi up` installed) gives the arguments and environment (a `fieldRef` as
the kubelet resolves it), and the process authenticates with a token of the Deployment's ServiceAccount (the
TokenRequest API), so the chart's RBAC, and the ClusterRoles this program aggregates into Kyverno's, are what it may
do. Only the network changes: every port is a free loopback one, and Kyverno's webhooks point at its loopback
address (`--serverIP`, Kyverno's documented out-of-cluster mode, DEVELOPMENT.md "Debugging local code"). The chart's
Deployment itself stays in the cluster where the chart puts it, its pod run by KWOK, so the API shows what a lab's
API shows.

- `running_kyverno(tools, plane)`: the Kyverno chart (`helm template` of charts/kyverno in the pinned module,
  e2e/kyverno/go.mod) applied without its Deployments, Jobs and CronJobs: CRDs, ConfigMaps, ServiceAccounts and RBAC;
  then both controllers; ready once the admission controller answers its readiness probe and has registered its
  webhooks, and the background controller holds its lease.
- `running_gpu_operator(tools, plane, namespace)`: the operator's controller built from the v26.7.0 source
  (e2e/build-cluster.sh), in a private mount namespace where `/opt/gpu-operator` holds the `assets/` of the source
  copy it was built from (`Tools.gpu_operator_assets`; never the reference-data folder, which `make upstream` fills
  without the operator's source) (the
  operator reads its operand manifests only from that path, controllers/state_manager.go; its image puts them
  there); ready once it answers /readyz. `gpu_operator_once_installed` starts it the way the kubelet would, once
  the chart's operator pod runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from knowledge.gpu_operator import DRIVER_UPGRADE_DONE, DRIVER_UPGRADE_STATE_LABEL, NFD_NVIDIA_PCI_LABEL
from tests.e2e.control_plane import (
    E2E_DIR,
    SERVER_NODE,
    ControlPlane,
    Processes,
    healthy,
    insecure,
    pinned_module_dir,
    wait_until,
)
from tests.e2e.kube import Api, Kubectl, load_documents
from tests.e2e.servers import ServerError, Tools, free_ports, write_kubeconfig
from tests.environ import process_environment

KYVERNO_MODULE = "github.com/kyverno/kyverno"
KYVERNO_NAMESPACE = "kyverno"
KYVERNO_RELEASE = "kyverno"
# The chart's Deployments and their containers (charts/kyverno/templates/*-controller/deployment.yaml).
KYVERNO_ADMISSION = ("kyverno-admission-controller", "kyverno")
KYVERNO_BACKGROUND = ("kyverno-background-controller", "controller")
# What the chart renders that only a running cluster would act on; the processes here take the controllers' place.
NOT_APPLIED = {"Deployment", "Job", "CronJob", "Pod"}
# Kyverno registers this at start (its own policies' validation): the sign that its webhook controller is running.
KYVERNO_POLICY_WEBHOOK = "kyverno-policy-validating-webhook-cfg"
TOKEN_DURATION = "24h"
OPERATOR_ASSETS_MOUNT = "/opt/gpu-operator"
OPERATOR_VERSION = "v26.7.0"
LAUNCH_POLL_SECONDS = 0.5
# The operator's upgrade controller reconciles on its own node labels, its driver DaemonSets' generation and every
# 2 minutes (controllers/upgrade_controller.go plannedRequeueInterval): a driver pod it deleted and KWOK restarted,
# or a node the wave cordoned, is seen at the next requeue. Here a label it watches changes on the control-plane
# Node (no GPU, no driver: never part of an upgrade) every few seconds instead, so each wait is seconds, not minutes.
# Its value is "false": the operator skips a node only for "true" (k8s-operator-libs SkipNodeUpgrade).
UPGRADE_NUDGE_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
UPGRADE_NUDGE_SECONDS = 3.0
# internal/state/manager.go: the NVIDIADriver and GPUCluster controllers' template directories.
OPERATOR_MANIFEST_DIRS = (
    "state-driver",
    "state-dra-driver",
    "state-dcgm",
    "state-dcgm-exporter",
    "state-dra-validation",
)


@dataclass(frozen=True)
class Container:
    """One container of a Deployment, as the kubelet would start it."""

    service_account: str
    args: list[str]
    env: dict[str, str]


def container_of(deployment: Mapping[str, Any], name: str, pod_name: str) -> Container:
    """The container's arguments and environment, `fieldRef`s resolved for a pod named `pod_name`."""
    spec = deployment["spec"]["template"]["spec"]
    container = next(c for c in spec["containers"] if c["name"] == name)
    namespace = deployment["metadata"]["namespace"]
    account = spec.get("serviceAccountName") or "default"
    fields = {"metadata.namespace": namespace, "metadata.name": pod_name, "spec.serviceAccountName": account}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif "fieldRef" in (item.get("valueFrom") or {}):
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        # resourceFieldRef (a memory limit for GOMEMLIMIT) has no meaning for a process outside a cgroup.
    return Container(account, [*container.get("command", [])[1:], *container.get("args", [])], env)


def service_account_kubeconfig(kubectl: Kubectl, plane: ControlPlane, namespace: str, account: str) -> Path:
    """A kubeconfig holding a token the API server issues for `namespace/account` (TokenRequest)."""
    token = kubectl("-n", namespace, "create", "token", account, f"--duration={TOKEN_DURATION}").strip()
    config = yaml.safe_load(plane.kubeconfig.read_text())
    ca = Path(config["clusters"][0]["cluster"]["certificate-authority"])
    path = plane.work / f"kubeconfig-{namespace}-{account}"
    write_kubeconfig(path, plane.cluster.url, ca, token)
    return path


# ------------------------------------------------------------------------------------------------------- Kyverno


def kyverno_chart(tools: Tools, work: Path) -> list[dict[str, Any]]:
    """The Kyverno chart of the pinned module, rendered as a user's `helm install` would render it, and the CRDs of
    the pinned module's config/crds/policies.kyverno.io.

    Three of the chart's dependencies are fetched from chart repositories at `helm dependency build` and are not in
    the module: kyverno-api (the policies.kyverno.io CRDs, which config/crds holds), openreports and reports-server
    (both off by default). A copy of the chart without those three renders; the CRDs come from config/crds.
    """
    module = pinned_module_dir(E2E_DIR / "kyverno", KYVERNO_MODULE)
    chart = work / "chart" / "kyverno"
    shutil.rmtree(chart.parent, ignore_errors=True)
    shutil.copytree(module / "charts" / "kyverno", chart)
    for path in chart.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["dependencies"] = [d for d in meta["dependencies"] if not d.get("repository")]
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    (chart / "Chart.lock").unlink()
    version = subprocess.run(
        [str(tools.kube_apiserver), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    done = subprocess.run(
        [
            str(tools.helm),
            "template",
            KYVERNO_RELEASE,
            str(chart),
            "--namespace",
            KYVERNO_NAMESPACE,
            "--kube-version",
            version,
            "--skip-tests",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **process_environment(),
            "HELM_CACHE_HOME": str(work / "helm-cache"),
            "HELM_CONFIG_HOME": str(work / "helm"),
        },
    )
    if done.returncode != 0:
        raise ServerError(f"helm template of the Kyverno chart failed: {done.stderr.strip()}")
    crds = sorted((module / "config" / "crds" / "policies.kyverno.io").glob("*.yaml"))
    return [doc for path in crds for doc in load_documents(path.read_text())] + load_documents(done.stdout)


def apply_objects(kubectl: Kubectl, objects: list[dict[str, Any]], *, field_manager: str) -> None:
    """Server-side apply, CRDs first (and Established), as Helm would install them."""
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
    for batch in (crds, rest):
        if batch:
            stream = "\n---\n".join(yaml.safe_dump(o) for o in batch)
            kubectl(
                "apply", "--server-side", "--force-conflicts", "--field-manager", field_manager, "-f", "-", stdin=stream
            )
        if batch is crds and crds:
            names = [f"crd/{o['metadata']['name']}" for o in crds]
            kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


def _lease_held(kubectl: Kubectl, namespace: str, name: str) -> bool:
    done = kubectl.run("-n", namespace, "get", "lease", name, "-o", "jsonpath={.spec.holderIdentity}")
    return done.returncode == 0 and bool(done.stdout.strip())


@contextlib.contextmanager
def running_kyverno(tools: Tools, plane: ControlPlane) -> Iterator[None]:
    """Kyverno's chart and its admission and background controllers, until the block ends."""
    kubectl = plane.kubectl
    work = plane.work / "kyverno"
    work.mkdir(exist_ok=True)
    rendered = kyverno_chart(tools, work)
    kubectl.ensure_namespace(KYVERNO_NAMESPACE)
    apply_objects(kubectl, [o for o in rendered if o["kind"] not in NOT_APPLIED], field_manager="helm")
    deployments = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "Deployment"}
    webhook_port, admission_metrics, background_metrics = free_ports(3)
    admission = container_of(deployments[KYVERNO_ADMISSION[0]], KYVERNO_ADMISSION[1], "kyverno-admission-e2e")
    background = container_of(deployments[KYVERNO_BACKGROUND[0]], KYVERNO_BACKGROUND[1], "kyverno-background-e2e")
    # Prometheus metrics on loopback (Kyverno serves them even when told not to export), controller-runtime's off.
    loopback = ["--metricsHost=127.0.0.1", "--controllerRuntimeMetricsAddress=0", "--profile=false"]
    logs = (work / "kyverno-admission-controller.log", work / "kyverno-background-controller.log")
    processes = Processes([])
    try:
        admission_config = service_account_kubeconfig(kubectl, plane, KYVERNO_NAMESPACE, admission.service_account)
        processes.spawn(
            "kyverno-admission-controller",
            [
                str(tools.kyverno_admission_controller),
                *admission.args,
                *loopback,
                f"--metricsPort={admission_metrics}",
                f"--kubeconfig={admission_config}",
                # Out of cluster: the webhooks' URL and the serving cert's SAN are this address.
                f"--serverIP=127.0.0.1:{webhook_port}",
                "--webhookServerHost=127.0.0.1",
                f"--webhookServerPort={webhook_port}",
            ],
            logs[0],
            admission.env,
        )
        background_config = service_account_kubeconfig(kubectl, plane, KYVERNO_NAMESPACE, background.service_account)
        processes.spawn(
            "kyverno-background-controller",
            [
                str(tools.kyverno_background_controller),
                *background.args,
                *loopback,
                f"--metricsPort={background_metrics}",
                f"--kubeconfig={background_config}",
            ],
            logs[1],
            background.env,
        )
        all_logs = (*plane.cluster.logs, *logs)

        def alive() -> None:
            if processes.exited():
                raise ServerError(f"{', '.join(processes.exited())} exited")

        def admission_ready() -> bool:
            alive()
            if not healthy(f"https://127.0.0.1:{webhook_port}/health/readiness", insecure()):
                return False
            return kubectl.run("get", "validatingwebhookconfiguration", KYVERNO_POLICY_WEBHOOK).returncode == 0

        wait_until("Kyverno's admission controller ready with its webhooks", admission_ready, all_logs)

        def background_ready() -> bool:
            alive()
            return _lease_held(kubectl, KYVERNO_NAMESPACE, "kyverno-background-controller")

        wait_until("Kyverno's background controller leading", background_ready, all_logs)
        yield
    finally:
        processes.stop()


# ------------------------------------------------------------------------------------------------------- GPU Operator


def in_operator_mount_namespace(argv: list[str], assets: Path) -> list[str]:
    """`argv` run where /opt/gpu-operator holds `assets`, as the operator's image has it, seen by this process alone:
    a private mount namespace (util-linux `unshare`; a user namespace too when not root) with a tmpfs over /opt.

    The image also has /opt/gpu-operator/manifests/, the NVIDIADriver and GPUCluster controllers' templates (the
    repository's manifests/, not in the source snapshot). Those controllers only need the directories to exist at
    start, and this stack creates neither custom resource (the chart's `driver.nvidiaDriverCRD.enabled` and
    `gpuCluster.deployCR` are false): they are empty here."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    manifests = " ".join(f"{OPERATOR_ASSETS_MOUNT}/manifests/{name}" for name in OPERATOR_MANIFEST_DIRS)
    script = (
        f'mount -t tmpfs tmpfs /opt && cp -R "$0" {OPERATOR_ASSETS_MOUNT} && mkdir -p {manifests} && shift && exec "$@"'
    )
    return ["unshare", *user, "--mount", "--propagation", "private", "sh", "-c", script, str(assets), "--", *argv]


def start_gpu_operator(tools: Tools, plane: ControlPlane, namespace: str, processes: Processes) -> int:
    """Start the operator's controller as its chart's Deployment `gpu-operator` in `namespace` declares it; returns
    the loopback port of its health probes.

    It runs as the Deployment's ServiceAccount when the chart is the release built here. A change-table row on the
    26.3 line installs that chart, whose operator image this tier cannot build (only v26.7.0's source is at hand):
    the v26.7.0 controller then reconciles the 26.3 ClusterPolicy with the admin's credentials, because 26.3's
    ClusterRole does not hold what 26.7's operands are granted (resource.k8s.io resourceclaims), which it may only
    grant holding it."""
    assets = tools.gpu_operator_assets
    if not (assets / "state-driver").is_dir():
        # Without its manifests the operator would start, reconcile nothing and leave every GPU gate to time out.
        raise ServerError(f"the GPU Operator's operand manifests are not at {assets}: run `make e2e-tools`")
    kubectl = plane.kubectl
    deployment = kubectl.json("-n", namespace, "get", "deployment", "gpu-operator")
    operator = container_of(deployment, "gpu-operator", "gpu-operator-e2e")
    (probe_port,) = free_ports(1)
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    log = operator_log(plane)
    if image.rsplit(":", 1)[-1] == OPERATOR_VERSION:
        config = service_account_kubeconfig(kubectl, plane, namespace, operator.service_account)
    else:
        config = plane.kubeconfig
        with log.open("a") as out:
            out.write(f"e2e: the chart runs {image}; the controller built here, {OPERATOR_VERSION}, runs as admin\n")
    argv = [
        str(tools.gpu_operator),
        *operator.args,
        # Out of cluster its leader election needs the namespace it would read from the pod's files.
        f"--leader-elect-namespace={namespace}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
    ]
    processes.spawn(
        "gpu-operator",
        in_operator_mount_namespace(argv, assets),
        log,
        {**operator.env, "KUBECONFIG": str(config)},
    )
    return probe_port


def operator_log(plane: ControlPlane) -> Path:
    return plane.work / "gpu-operator.log"


def upgrade_in_flight(api: Api, namespace: str) -> bool:
    """`in_flight` of the cluster as it is now: its Nodes and the operator's DaemonSets in `namespace`."""
    return in_flight(api.items("/api/v1/nodes"), api.items(f"/apis/apps/v1/namespaces/{namespace}/daemonsets"))


def in_flight(nodes: list[dict[str, Any]], daemonsets: list[dict[str, Any]]) -> bool:
    """Whether the operator's upgrade controller has a node to move: a GPU node in an upgrade state other than done,
    or in none yet, a node cordoned (a wave's turn), or an operand DaemonSet whose pods are not all on its newest
    template (a driver change the controller has yet to mark upgrade-required on a node). Otherwise nothing waits
    on its 2-minute requeue, and a nudge would only cost a full ClusterPolicy reconcile (the skip label is one its
    node watch reacts to): about 150 API calls, a third of them deletes of the disabled operands' objects; nudged
    every 3 s, the deployed stack's API server ran at a fifth of a core, serving 62 requests a second (its /metrics,
    docs/engine.md)."""
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        # A GPU node not yet labelled: the controller labels it upgrade-done at a reconcile, not at its pod's start.
        state = labels.get(DRIVER_UPGRADE_STATE_LABEL, "" if NFD_NVIDIA_PCI_LABEL not in labels else None)
        if state not in ("", DRIVER_UPGRADE_DONE) or (node.get("spec") or {}).get("unschedulable"):
            return True
    for daemonset in daemonsets:
        status = daemonset.get("status") or {}
        if status.get("observedGeneration") != daemonset["metadata"].get("generation"):
            return True
        if status.get("updatedNumberScheduled", 0) < status.get("desiredNumberScheduled", 0):
            return True
    return False


@contextlib.contextmanager
def nudging_upgrade_controller(kubectl: Kubectl, namespace: str) -> Iterator[None]:
    """Toggle `UPGRADE_NUDGE_LABEL` on the control-plane Node until the block ends (see the constant), while an
    upgrade is in flight (`upgrade_in_flight`)."""
    stopping = threading.Event()

    def nudge() -> None:
        value = "false"
        while not stopping.wait(UPGRADE_NUDGE_SECONDS):
            # `null` in a merge patch removes the label, as `kubectl label node <node> <label>-`. A nudge the
            # server refused (it is stopped and started by some tests) is only a reconcile missed: the next comes.
            with contextlib.suppress(AssertionError, OSError):
                if upgrade_in_flight(kubectl.api, namespace):
                    kubectl.api.merge_patch(
                        f"/api/v1/nodes/{SERVER_NODE}",
                        {"metadata": {"labels": {UPGRADE_NUDGE_LABEL: value or None}}},
                    )
                    value = "" if value else "false"

    thread = threading.Thread(target=nudge, name="upgrade-nudge", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join(timeout=30)


@contextlib.contextmanager
def running_gpu_operator(tools: Tools, plane: ControlPlane, namespace: str) -> Iterator[Path]:
    """The operator's controller, ready, until the block ends (the chart is installed). Yields its log."""
    processes = Processes([])
    try:
        probe_port = start_gpu_operator(tools, plane, namespace, processes)

        def ready() -> bool:
            if processes.exited():
                raise ServerError("gpu-operator exited")
            return healthy(f"http://127.0.0.1:{probe_port}/readyz")

        wait_until("the GPU Operator's /readyz", ready, (*plane.cluster.logs, operator_log(plane)))
        with nudging_upgrade_controller(plane.kubectl, namespace):
            yield operator_log(plane)
    finally:
        processes.stop()


@dataclass
class OperatorLauncher:
    """What the kubelet would do for the operator's pod: once the chart's pod is Running (scheduled by kube-scheduler,
    run by KWOK), its container starts, here the operator's process; when a chart upgrade rolls the Deployment to a
    new pod, the process is started again from the new Deployment. `errors` holds what went wrong in the thread."""

    errors: list[str]
    processes: Processes
    # The operator pods a process was started for, in order.
    pods: list[str]


@contextlib.contextmanager
def gpu_operator_once_installed(tools: Tools, plane: ControlPlane, namespace: str) -> Iterator[OperatorLauncher]:
    """Run the operator's process for the chart's operator pod, from when `pulumi up` installs it, until the block
    ends."""
    launcher = OperatorLauncher([], Processes([]), [])
    stopping = threading.Event()

    def watch() -> None:
        # One thread starts every process and lives until the block ends: a process dies with the thread that
        # started it (PR_SET_PDEATHSIG follows the thread).
        while not stopping.is_set():
            try:
                pods = plane.kubectl.api.items(f"/api/v1/namespaces/{namespace}/pods", "app=gpu-operator")
                running = sorted(
                    (p["metadata"]["creationTimestamp"], p["metadata"]["name"])
                    for p in pods
                    if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
                )
                if running and (not launcher.pods or running[-1][1] != launcher.pods[-1]):
                    launcher.processes.stop()
                    launcher.processes = Processes([])
                    start_gpu_operator(tools, plane, namespace, launcher.processes)
                    launcher.pods.append(running[-1][1])
            except Exception as error:  # reported at the block's end: a thread cannot fail the test itself
                launcher.errors.append(repr(error))
                return
            stopping.wait(LAUNCH_POLL_SECONDS)

    thread = threading.Thread(target=watch, name="gpu-operator-launcher", daemon=True)
    thread.start()
    try:
        with nudging_upgrade_controller(plane.kubectl, namespace):
            yield launcher
    finally:
        stopping.set()
        thread.join(timeout=60)
        launcher.processes.stop()


# ------------------------------------------------------------------------------------------------- Kubeflow notebooks

NOTEBOOKS_VERSION = "v1.11.0"
NOTEBOOKS_OVERLAY = "components/notebook-controller/config/overlays/standalone"
NOTEBOOK_CONTROLLER = ("notebook-controller-deployment", "manager")


def notebook_controller_install(tools: Tools, plane: ControlPlane, upstream: Path) -> list[dict[str, Any]]:
    """Kubeflow's own standalone install of the notebook controller (`kubectl kustomize` of its overlay at v1.11.0:
    namespace, Notebook CRD, RBAC, its ConfigMap with ENABLE_CULLING=false and USE_ISTIO=false, the Deployment)."""
    overlay = upstream / "kubeflow-notebooks" / NOTEBOOKS_VERSION / NOTEBOOKS_OVERLAY
    return load_documents(plane.kubectl("kustomize", str(overlay)))


def _resolved_env(
    deployment: Mapping[str, Any], name: str, configmaps: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """The container's environment with its configMapKeyRef values read from the rendered ConfigMaps."""
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name)
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("configMapKeyRef")
        if ref is not None:
            env[item["name"]] = configmaps[ref["name"]][ref["key"]]
        elif "value" in item:
            env[item["name"]] = str(item["value"])
    return env


@contextlib.contextmanager
def running_notebook_controller(tools: Tools, plane: ControlPlane, upstream: Path) -> Iterator[dict[str, str]]:
    """Kubeflow's notebook controller built from v1.11.0 (e2e/build-cluster.sh), installed as its standalone overlay
    declares (everything but the Deployment applied), run as its ServiceAccount with the Deployment's environment,
    culling off as the overlay ships it; ready once it answers /readyz. Yields that environment."""
    rendered = notebook_controller_install(tools, plane, upstream)
    crds = [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    plane.kubectl("apply", "--server-side", "-f", "-", stdin="\n---\n".join(yaml.safe_dump(o) for o in crds))

    def established() -> bool:
        crd = plane.kubectl.json("get", "crd", crds[0]["metadata"]["name"])
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    # Polled: `kubectl wait` fails at once on a CRD whose status has no conditions yet.
    wait_until("the Notebook CRD Established", established, plane.cluster.logs)
    rest = [o for o in rendered if o["kind"] not in NOT_APPLIED and o["kind"] != "CustomResourceDefinition"]
    apply_objects(plane.kubectl, rest, field_manager="kustomize")
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    configmaps = {o["metadata"]["name"]: o.get("data") or {} for o in rendered if o["kind"] == "ConfigMap"}
    env = _resolved_env(deployment, NOTEBOOK_CONTROLLER[1], configmaps)
    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    config = service_account_kubeconfig(plane.kubectl, plane, namespace, account)
    (probe_port,) = free_ports(1)
    log = plane.work / "notebook-controller.log"
    processes = Processes([])
    try:
        argv = [str(tools.notebook_controller), "--metrics-addr=0", f"--probe-addr=127.0.0.1:{probe_port}"]
        processes.spawn("notebook-controller", argv, log, {**env, "KUBECONFIG": str(config)})

        def ready() -> bool:
            if processes.exited():
                raise ServerError("notebook-controller exited")
            return healthy(f"http://127.0.0.1:{probe_port}/readyz")

        wait_until("Kubeflow's notebook controller's /readyz", ready, (*plane.cluster.logs, log))
        yield env
    finally:
        processes.stop()
        # What it installed goes with it: the session's control plane is shared.
        for obj in reversed([o for o in rendered if o["kind"] not in NOT_APPLIED]):
            where = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
            plane.kubectl.run(
                *where, "delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found", "--wait=false"
            )
