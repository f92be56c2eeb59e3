"""The e2e tier: a real etcd + kube-apiserver for the whole session, and (`control_plane`, started by the first test
that asks for it) a cluster whose agents are upstream programs. Runs only under `make e2e`.

Fixtures for a cluster with its own agents (tests/e2e/control_plane.py, tests/e2e/cluster_programs.py):
- `control_plane` (session): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK on loopback,
  one Ready control-plane Node; `kyverno_running` (session): the same, with Kyverno's chart and its admission and
  background controllers running; `control_plane_crds` (session): the upstream CRDs the stack writes to;
- `reported_control_plane(tools, work)`: a control plane of a test module's own (a state the session's must not
  see), whose logs a failed test's report shows; `running_kyverno` and `running_gpu_operator` start those programs
  on it.
A test on a shared control plane removes what it created (Nodes, namespaces) before it ends.
- `deployed` (session): prod after one real `pulumi up`, on a control plane of its own (`deployed_plane`).
- `behind_proxy` (session): the same, behind a proxy that asks for a login (issue 50), on another plane of its own.

In parallel (`make e2e E2E_WORKERS=N`, pytest-xdist `--dist loadgroup`; issue 46): each worker is a process of its
own, so it starts its own servers, control planes and deployed stack, each on free loopback ports and in its own
temp dirs, when its first test asks for them. Every test is in one xdist group, which one worker runs in
collection order (`xdist_group_of`): the tests of the `deployed` stack together (they share its one `up`), every
other module on its own (its module fixtures are set up once). A module that must share a worker with another names
a group itself: `pytestmark = pytest.mark.xdist_group("name")`. A new module needs nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import _pytest.runner as pytest_runner
import pytest

from offline.runner import ROOT_DIR, read_stack_file
from tests.e2e import xdist_groups
from tests.e2e.chart import package_chart
from tests.e2e.cluster_programs import running_kyverno
from tests.e2e.control_plane import ControlPlane, start_control_plane
from tests.e2e.durations import start as start_durations
from tests.e2e.engine import Engine, PulumiStack
from tests.e2e.engine_deployed import Deployed, deploy
from tests.e2e.engine_stacks import engine_config, new_stack
from tests.e2e.kube import Kubectl
from tests.e2e.kyverno_cases import Runs
from tests.e2e.kyverno_cli import Kyverno
from tests.e2e.proxmox_standin import SSHD
from tests.e2e.servers import Cluster, Tools, log_tails, start_cluster
from tests.e2e.stacks import Previewed, preview_clusterpolicy, preview_options, preview_prod
from tests.e2e.steps import StepRunner

HERE = Path(__file__).resolve().parent
ENABLE_ENV = "GPU_POOL_E2E"
CURRENT_TEST_ENV = "PYTEST_CURRENT_TEST"
TOOLS_ENV = "E2E_TOOLS_BIN"
DEFAULT_BIN = ROOT_DIR / ".tools" / "e2e" / "bin"
ENGINE_ENV = "ENGINE_BIN"
DEFAULT_ENGINE_BIN = ROOT_DIR / ".tools" / "engine" / "bin"
ENGINE_WORK = ROOT_DIR / "build"
# The CRDs of what the stack writes to and the chart installs, from ../shared/upstream (never copied here).
UPSTREAM_CRDS = (
    "gpu-operator/v26.7.0/chart/crds/nvidia.com_clusterpolicies.yaml",
    "gpu-operator/v26.7.0/chart/crds/nvidia.com_nvidiadrivers.yaml",
    "gpu-operator/v26.7.0/chart/crds/nvidia.com_gpuclusters.yaml",
    "gpu-operator/v26.7.0/chart/crds/resource.nvidia.com_computedomains.yaml",
    "gpu-operator/v26.7.0/chart/crds/resource.nvidia.com_computedomaincliques.yaml",
    "gpu-operator/v26.7.0/chart/charts/node-feature-discovery/crds/nfd-api-crds.yaml",
    "kyverno/v1.19.0/kyverno.io_clusterpolicies.yaml",
    "kyverno/v1.19.0/policies.kyverno.io_mutatingpolicies.yaml",
    "kyverno/v1.19.0/policies.kyverno.io_generatingpolicies.yaml",
    "kyverno/v1.19.0/policies.kyverno.io_validatingpolicies.yaml",
    "prometheus-operator/v0.93.0/monitoring.coreos.com_prometheusrules.yaml",
)
# The Kyverno CRDs of the running Kyverno come with its chart (tests/e2e/cluster_programs.py).
CONTROL_PLANE_CRDS = tuple(crd for crd in UPSTREAM_CRDS if not crd.startswith("kyverno/"))
# Clusters this session started, for the failure report.
STARTED: list[Cluster | ControlPlane] = []


def _keep_current_test_var(item: pytest.Item, when: str | None) -> None:
    """pytest's own `_update_current_test_var`, except that after a test's teardown PYTEST_CURRENT_TEST keeps a value
    instead of being deleted. This tier's threads outlive a test (the cluster stand-in, the operator's launcher, a
    watch) and copy the environment as they work: urllib does at every request (`getproxies`), and so does every
    process they start. A copy lists the keys, then reads each; the key pytest deleted in between raised
    KeyError('PYTEST_CURRENT_TEST') in a thread, which failed CI at stop 54 and a run here after it."""
    os.environ[CURRENT_TEST_ENV] = f"{item.nodeid} ({when or 'done'})".replace("\x00", "(null)")


def pytest_configure(config: pytest.Config) -> None:
    """`make e2e` writes the run's slowest tests to a file CI shows (tests/e2e/durations.py); under xdist, the
    workers will publish each test's group to a folder named here (tests/e2e/xdist_groups.py). PYTEST_CURRENT_TEST
    is never deleted during the run (`_keep_current_test_var`)."""
    if os.environ.get(ENABLE_ENV) == "1":
        # The name pytest 9.2 (uv.lock) calls it by at each phase; renamed in another version, this fails loudly.
        assert callable(pytest_runner._update_current_test_var), "pytest no longer has _update_current_test_var"
        pytest_runner._update_current_test_var = _keep_current_test_var
    recorder = start_durations(config)
    if recorder is not None:
        config.pluginmanager.register(recorder, "e2e-durations")
    xdist_groups.name_folder(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    xdist_groups.remove_folder(config)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """xdist's loadgroup, each group one worker's (tests/e2e/xdist_groups.py says why it is not xdist's own)."""
    return xdist_groups.make_scheduler(config, log)


# The xdist group of every test of the `deployed` stack (xdist_group_of).
DEPLOYED_GROUP = "deployed"


def xdist_group_of(item: pytest.Item) -> str:
    """The group a test runs in under `--dist loadgroup`: the one its module names, else DEPLOYED_GROUP for a test
    of the `deployed` stack (one `up` serves them all: spread over workers, each worker would `up` it again),
    else its module's."""
    named = xdist_groups.group_of(item)
    if named is not None:
        return named
    if "deployed" in getattr(item, "fixturenames", ()):
        return DEPLOYED_GROUP
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The plain `pytest` run (`make test`) skips this folder: it needs built servers and takes longer."""
    if os.environ.get(ENABLE_ENV) == "1":
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
        # The `deployed` stacks' tests are the tier's longest chains: first in the queue, so that under xdist a
        # worker starts on each at once while the others take the modules one by one (`--no-loadscope-reorder`
        # keeps this order; the Makefile passes it).
        items.sort(key=lambda item: "deployed" not in getattr(item, "fixturenames", ()))
        xdist_groups.publish(config, items)
        return
    skip = pytest.mark.skip(reason=f"e2e tier: run `make e2e` (sets {ENABLE_ENV}=1)")
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test shows where the server logs are kept, and their last lines."""
    report: pytest.TestReport = yield
    if report.failed and STARTED:
        report.sections.append(("e2e server logs", log_tails(STARTED[-1].logs)))
    return report


def require_built(missing: list[str], bin_dir: Path, target: str) -> None:
    """Tools not built: CI fails (it must run every tier), elsewhere the tier skips, naming the make target."""
    if missing:
        message = f"{', '.join(missing)} not built in {bin_dir}: run `make {target}`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def e2e_tools() -> Tools:
    # Absolute: the tools run with a temp project as their working directory.
    tools = Tools(Path(os.environ.get(TOOLS_ENV) or DEFAULT_BIN).resolve())
    require_built(tools.missing(), tools.bin_dir, "e2e-tools")
    return tools


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The real Pulumi CLI, language host and providers (`make engine-tools`)."""
    # `make engine-tools` writes which engine it picked (yours or the source build: e2e/select-engine.sh).
    selected = DEFAULT_ENGINE_BIN.parent / "selected"
    chosen = os.environ.get(ENGINE_ENV) or (selected.read_text().strip() if selected.is_file() else None)
    built = Engine(Path(chosen or DEFAULT_ENGINE_BIN).resolve())
    require_built(built.missing(), built.bin_dir, "engine-tools")
    return built


@pytest.fixture(scope="session")
def packaged_chart(e2e_tools: Tools, upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The vendored chart as NVIDIA publishes it: the local chart source the engine stacks name."""
    return package_chart(e2e_tools, upstream, tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="session")
def prod_engine_config(cluster: Cluster, packaged_chart: Path) -> dict[str, object]:
    return engine_config(read_stack_file("prod"), cluster.kubeconfig, packaged_chart)


@pytest.fixture(scope="session")
def engine_path(e2e_tools: Tools) -> list[Path]:
    """What the program's steps run besides the engine: uv (the language host's toolchain) and kubectl."""
    return [ROOT_DIR / ".tools" / "bin", e2e_tools.bin_dir]


@pytest.fixture(scope="session")
def prod_engine_stack(
    engine: Engine,
    engine_path: list[Path],
    prod_engine_config: dict[str, object],
    crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> PulumiStack:
    """prod under the real engine, preflights off as in `make preview` (GPU_POOL_OFFLINE=1)."""
    work = tmp_path_factory.mktemp("engine-prod")
    return new_stack(engine, work, "prod", prod_engine_config, engine_path, {"GPU_POOL_OFFLINE": "1"})


@contextlib.contextmanager
def reported_cluster(tools: Tools, work: Path) -> Iterator[Cluster]:
    """etcd + kube-apiserver on free loopback ports, whose logs a failed test's report shows."""
    with start_cluster(tools, work) as running:
        STARTED.append(running)
        yield running


@contextlib.contextmanager
def reported_control_plane(tools: Tools, work: Path) -> Iterator[ControlPlane]:
    """A control plane (tests/e2e/control_plane.py) whose logs, Kyverno's and the operator's included, a failed
    test's report shows."""
    require_built(tools.missing_cluster_programs(), tools.bin_dir, "e2e-tools")
    with start_control_plane(tools, work) as plane:
        STARTED.append(plane)
        try:
            yield plane
        finally:
            STARTED.remove(plane)


def kubectl_for(tools: Tools, cluster: Cluster) -> Kubectl:
    return Kubectl(tools.kubectl, cluster.kubeconfig, cluster.kubeconfig.parent / "kubectl-cache")


@pytest.fixture(scope="session")
def cluster(e2e_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's server; logs stay in pytest's temp dir (the last 3 runs are kept)."""
    with reported_cluster(e2e_tools, tmp_path_factory.mktemp("kube")) as running:
        yield running


@pytest.fixture(scope="session")
def kubectl(e2e_tools: Tools, cluster: Cluster) -> Kubectl:
    return kubectl_for(e2e_tools, cluster)


@pytest.fixture(scope="session")
def control_plane(e2e_tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The session's cluster with its own agents, started when a test first needs it."""
    with reported_control_plane(e2e_tools, tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kyverno_running(e2e_tools: Tools, control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane with Kyverno running."""
    with running_kyverno(e2e_tools, control_plane):
        yield control_plane


@pytest.fixture(scope="session")
def control_plane_crds(control_plane: ControlPlane, upstream: Path) -> list[str]:
    return install_crds(control_plane.kubectl, upstream, CONTROL_PLANE_CRDS)


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl, upstream: Path) -> list[str]:
    return install_crds(kubectl, upstream, UPSTREAM_CRDS)


def install_crds(kubectl: Kubectl, upstream: Path, crds: tuple[str, ...]) -> list[str]:
    """The upstream CRDs, installed and Established. Server-side apply: the largest exceed the annotation limit
    client-side apply would need."""
    names: list[str] = []
    for relative in crds:
        out = kubectl(
            "apply", "--server-side", "--field-manager", "e2e-setup", "-o", "name", "-f", str(upstream / relative)
        )
        names += out.split()
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return names


@pytest.fixture(scope="session")
def prod_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    return preview_prod(tmp_path_factory.mktemp("prod"))


@pytest.fixture(scope="session")
def options_stack(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Previewed:
    # Its commands name the e2e kubeconfig and context (gpu-pool:kubernetes), so they run here as written.
    return preview_options(tmp_path_factory.mktemp("options"), cluster.kubeconfig)


@pytest.fixture(scope="session")
def clusterpolicy_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    """prod with `kyverno.policyApi: clusterpolicy`: the ClusterPolicies a Kyverno 1.13 to 1.16 cluster gets."""
    return preview_clusterpolicy(tmp_path_factory.mktemp("prod-clusterpolicy"))


# The ClusterPolicy stacks (prod's ClusterPolicy twin and the options stack); prod itself writes the CEL policies,
# which tests/e2e/test_kyverno_cel_policies.py runs.
@pytest.fixture(params=["clusterpolicy", "options"])
def stack(request: pytest.FixtureRequest) -> Previewed:
    previewed: Previewed = request.getfixturevalue(f"{request.param}_stack")
    return previewed


@pytest.fixture(scope="session")
def step_runner_for(
    e2e_tools: Tools, kubectl: Kubectl, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[Previewed], StepRunner]:
    nowhere = tmp_path_factory.mktemp("ambient") / "no-such-kubeconfig"

    def runner(stack: Previewed) -> StepRunner:
        # Without gpu-pool:kubernetes the steps use the ambient kubeconfig; with it, the ambient one must not matter.
        ambient = cluster.kubeconfig if stack.config.kubernetes.kubeconfig is None else nowhere
        return StepRunner(stack, e2e_tools, kubectl, ambient)

    return runner


@pytest.fixture(scope="session")
def kyverno(e2e_tools: Tools) -> Kyverno:
    return Kyverno(e2e_tools.kyverno)


@pytest.fixture(scope="session")
def runs(kyverno: Kyverno, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """`kyverno apply` once per stack and question, shared by the Kyverno tests."""
    return Runs(kyverno, tmp_path_factory.mktemp("kyverno"))


@pytest.fixture(scope="session")
def deployed_plane(
    e2e_tools: Tools, upstream: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """The `deployed` stack's own control plane, with Kyverno running and the upstream CRDs the stack writes to. Its
    `up` leaves prod's Nodes, driver DaemonSet and release there until the session ends: on the session's
    `control_plane` every later test would find prod's names taken, so the engine tests had to run last, one after
    another with everything else; on a plane of their own they run in any order, beside the rest (issue 46)."""
    with deployed_control_plane(e2e_tools, upstream, tmp_path_factory.mktemp("deployed-plane")) as plane:
        yield plane


@contextlib.contextmanager
def deployed_control_plane(e2e_tools: Tools, upstream: Path, work: Path) -> Iterator[ControlPlane]:
    with reported_control_plane(e2e_tools, work) as plane, running_kyverno(e2e_tools, plane):
        install_crds(plane.kubectl, upstream, CONTROL_PLANE_CRDS)
        yield plane


@pytest.fixture(scope="session")
def deployed(
    engine: Engine,
    engine_path: list[Path],
    e2e_tools: Tools,
    deployed_plane: ControlPlane,
    packaged_chart: Path,
) -> Iterator[Deployed]:
    """prod after one real `pulumi up` against its own control plane, with Kyverno running, the GPU Operator's
    controller and the Proxmox stand-in (tests/e2e/engine_deployed.py), shared by the engine tests: each test that
    changes it puts it back."""
    with deployed_stack(engine, engine_path, e2e_tools, deployed_plane, packaged_chart) as running:
        yield running


@contextlib.contextmanager
def deployed_stack(
    engine: Engine,
    engine_path: list[Path],
    e2e_tools: Tools,
    plane: ControlPlane,
    chart: Path,
    *,
    proxy_login: bool = False,
) -> Iterator[Deployed]:
    if not SSHD.is_file():
        message = f"{SSHD} is missing: install Debian's openssh-server (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Under build/ (ignored): the uv toolchain finds the project's pyproject.toml and uv.lock by searching up from
    # the project dir, both to list the program's packages and to keep the venv's editable install where it is.
    ENGINE_WORK.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="engine-up-", dir=ENGINE_WORK))
    try:
        with deploy(engine, engine_path, plane, e2e_tools, chart, work, proxy_login=proxy_login) as running:
            yield running
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def behind_proxy(
    engine: Engine,
    engine_path: list[Path],
    e2e_tools: Tools,
    upstream: Path,
    packaged_chart: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployed]:
    """prod as `deployed` is, behind a proxy that asks for a login (issue 50; tests/e2e/test_canaries_deployed.py),
    on a control plane of its own. Not the shared stack: main's program (tests/e2e/test_engine_main_state.py) cannot
    run on a stack whose Nodes record the login's files: it sees a changed proxy, a files turn over SSH, and the
    e2e domains have no SSH key (components/gpu_failure_domain/turns.py refuses it)."""
    plane_work = tmp_path_factory.mktemp("proxy-plane")
    with (
        deployed_control_plane(e2e_tools, upstream, plane_work) as plane,
        deployed_stack(engine, engine_path, e2e_tools, plane, packaged_chart, proxy_login=True) as running,
    ):
        yield running
