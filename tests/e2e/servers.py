"""A real etcd + kube-apiserver on loopback, for the e2e tier: certs, free ports, a kubeconfig, a clean stop.

Both binaries come from `make e2e-tools` (e2e/build-tools.sh). The flags follow what `kube-apiserver` needs
without a controller-manager or scheduler: nothing here schedules pods or creates ServiceAccounts. The e2e control
plane (tests/e2e/control_plane.py) starts one with its garbage collector on and runs the controllers beside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.environ import process_environment

READY_SECONDS = 60
STOP_SECONDS = 15
START_ATTEMPTS = 3
LOG_TAIL_LINES = 25


class ServerError(Exception):
    pass


class EarlyExit(ServerError):
    """A server stopped before it was ready: most likely another process took its port first."""


@dataclass(frozen=True)
class Tools:
    """The pinned binaries `make e2e-tools` builds."""

    bin_dir: Path

    @property
    def etcd(self) -> Path:
        return self.bin_dir / "etcd"

    @property
    def kube_apiserver(self) -> Path:
        return self.bin_dir / "kube-apiserver"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def helm(self) -> Path:
        return self.bin_dir / "helm"

    @property
    def kyverno(self) -> Path:
        """The Kyverno CLI (`kubectl-kyverno`, installed as `kyverno`): the real policy engine."""
        return self.bin_dir / "kyverno"

    @property
    def gpu_operator_assets(self) -> Path:
        """The operand manifests of the operator's source copy the binary was built from (e2e/build-cluster.sh, after
        its SHA256SUMS check): the tier needs no other copy of the source than the one `make e2e-tools` stages."""
        return self.bin_dir.parent / "src" / "gpu-operator" / "assets"

    @property
    def profile_config(self) -> Path:
        """The device plugin's own config loader over profile documents (e2e/deviceplugin/profile-config)."""
        return self.bin_dir / "profile-config"

    def missing(self) -> list[str]:
        wanted = (self.etcd, self.kube_apiserver, self.kubectl, self.helm, self.kyverno, self.profile_config)
        return [path.name for path in wanted if not path.is_file()]

    # The cluster's own programs (e2e/build-cluster.sh, and build-tools.sh for the Kubernetes two): the e2e control
    # plane, tests/e2e/control_plane.py and cluster_programs.py.
    @property
    def kube_controller_manager(self) -> Path:
        return self.bin_dir / "kube-controller-manager"

    @property
    def kube_scheduler(self) -> Path:
        return self.bin_dir / "kube-scheduler"

    @property
    def kwok(self) -> Path:
        return self.bin_dir / "kwok"

    @property
    def kyverno_admission_controller(self) -> Path:
        return self.bin_dir / "kyverno-admission-controller"

    @property
    def kyverno_background_controller(self) -> Path:
        return self.bin_dir / "kyverno-background-controller"

    @property
    def gpu_operator(self) -> Path:
        return self.bin_dir / "gpu-operator"

    @property
    def notebook_controller(self) -> Path:
        """Kubeflow's notebook controller v1.11.0 (e2e/build-cluster.sh)."""
        return self.bin_dir / "notebook-controller"

    def missing_cluster_programs(self) -> list[str]:
        wanted = (
            self.kube_controller_manager,
            self.kube_scheduler,
            self.kwok,
            self.kyverno_admission_controller,
            self.kyverno_background_controller,
            self.gpu_operator,
            self.notebook_controller,
        )
        return [path.name for path in wanted if not path.is_file()]


@dataclass(frozen=True)
class Cluster:
    """A running API server: where it listens and how to reach it as the admin user."""

    url: str
    kubeconfig: Path
    logs: tuple[Path, ...]


def log_tails(logs: tuple[Path, ...], lines: int = LOG_TAIL_LINES) -> str:
    parts = []
    for log in logs:
        text = log.read_text(errors="replace").splitlines() if log.is_file() else ["(no log)"]
        parts.append(f"--- {log} (last {lines} lines)\n" + "\n".join(text[-lines:]))
    return "\n".join(parts)


def free_ports(count: int) -> list[int]:
    """Ports the OS hands out now, all distinct (held together until read). Another process may still take one
    before our server binds it: `start_cluster` retries when a server exits early."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _openssl(work: Path, command: str) -> None:
    # Run inside `work` with bare file names, so no path needs quoting.
    subprocess.run(["openssl", *command.split()], cwd=work, check=True, capture_output=True, timeout=60)


def write_certs(work: Path) -> None:
    """A CA, the API server's serving cert signed by it (SAN 127.0.0.1), and the service-account key pair.

    EC P-256 keys: generated in milliseconds, and the API server signs service-account tokens with ES256.
    """
    key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    _openssl(work, f"req -x509 {key} -days 1 -subj /CN=e2e-ca -keyout ca.key -out ca.crt")
    _openssl(work, f"req {key} -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr")
    (work / "apiserver.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _openssl(
        work,
        "x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile apiserver.ext -out apiserver.crt",
    )
    _openssl(work, "ecparam -name prime256v1 -genkey -noout -out sa.key")
    _openssl(work, "ec -in sa.key -pubout -out sa.pub")


def write_kubeconfig(path: Path, url: str, ca_file: Path, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": url, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "e2e-admin", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-admin"}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def _die_with_parent() -> None:
    # If pytest itself is killed (CI timeout, kill -9), the kernel stops the servers too: nothing outlives the run.
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def spawn(argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A server process writing to `log`, with the test's environment plus `env`; it dies with pytest."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            env={**process_environment(), **env} if env else None,
        )


def etcd_argv(tools: Tools, work: Path, client: int, peer: int) -> list[str]:
    client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    return [
        str(tools.etcd),
        "--name=e2e",
        f"--data-dir={work / 'etcd-data'}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=e2e={peer_url}",
        "--initial-cluster-state=new",
        # A throwaway store: no fsync keeps the run fast on slow disks.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(tools: Tools, work: Path, etcd_client: int, port: int, *, garbage_collector: bool) -> list[str]:
    return [
        str(tools.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={work / 'cert-dir'}",
        f"--tls-cert-file={work / 'apiserver.crt'}",
        f"--tls-private-key-file={work / 'apiserver.key'}",
        f"--client-ca-file={work / 'ca.crt'}",
        f"--token-auth-file={work / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        # As RKE2 runs it: the GPU Operator's operands (driver, toolkit, device plugin) are privileged pods.
        "--allow-privileged=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={work / 'sa.pub'}",
        f"--service-account-signing-key-file={work / 'sa.key'}",
        "--service-cluster-ip-range=10.0.0.0/24",
        # No kube-proxy or endpoints here: the default reconciler would keep rewriting the kubernetes Endpoints.
        "--endpoint-reconciler-type=none",
        # Without a kube-controller-manager there is no garbage collector: told so, the API server deletes at once
        # what pulumi-kubernetes deletes in the foreground (its default), instead of holding it forever on the
        # foregroundDeletion finalizer that only the collector removes (a replaced Job's delete timed out).
        f"--enable-garbage-collector={str(garbage_collector).lower()}",
    ]


def _ready(url: str, context: ssl.SSLContext, token: str) -> bool:
    request = urllib.request.Request(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return bool(response.status == 200 and response.read() == b"ok")
    except (urllib.error.URLError, OSError):
        return False


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """API server first (it holds etcd connections), then etcd: terminate, wait, kill after a timeout."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_SECONDS)


def _start_once(
    tools: Tools, work: Path, token: str, garbage_collector: bool
) -> tuple[Cluster, list[subprocess.Popen[bytes]]]:
    etcd_client, etcd_peer, port = free_ports(3)
    logs = (work / "kube-apiserver.log", work / "etcd.log")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        etcd = spawn(etcd_argv(tools, work, etcd_client, etcd_peer), logs[1])
        processes.append(etcd)
        argv = apiserver_argv(tools, work, etcd_client, port, garbage_collector=garbage_collector)
        apiserver = spawn(argv, logs[0])
        processes.insert(0, apiserver)
        url = f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(work / "ca.crt"))
        deadline = time.monotonic() + READY_SECONDS
        while not _ready(url, context, token):
            exited = [log.stem for log, p in zip(logs, processes, strict=True) if p.poll() is not None]
            if exited:
                raise EarlyExit(f"{' and '.join(exited)} exited early\n{log_tails(logs)}")
            if time.monotonic() > deadline:
                raise ServerError(f"{url}/readyz not ok after {READY_SECONDS} s\n{log_tails(logs)}")
            time.sleep(0.1)  # poll interval; the deadline above bounds the wait
    except BaseException:
        stop(processes)
        raise
    kubeconfig = work / "kubeconfig"
    write_kubeconfig(kubeconfig, url, work / "ca.crt", token)
    return Cluster(url, kubeconfig, logs), processes


@contextlib.contextmanager
def start_cluster(tools: Tools, work: Path, *, garbage_collector: bool = False) -> Iterator[Cluster]:
    """etcd and kube-apiserver in `work` (certs, data, logs), ready; both stopped and reaped on exit. With
    `garbage_collector`, the API server expects a kube-controller-manager's collector (tests/e2e/control_plane.py)."""
    write_certs(work)
    token = secrets.token_hex(24)
    # Static token file: token,user,uid,"groups". system:masters passes every RBAC check.
    (work / "tokens.csv").write_text(f'{token},e2e-admin,e2e-admin-uid,"system:masters"\n')
    attempt = 1
    while True:
        try:
            cluster, processes = _start_once(tools, work, token, garbage_collector)
            break
        except EarlyExit:
            if attempt == START_ATTEMPTS:
                raise
            attempt += 1
            shutil.rmtree(work / "etcd-data", ignore_errors=True)
    try:
        yield cluster
    finally:
        stop(processes)
        alive = [p.pid for p in processes if p.returncode is None]
        if alive:
            raise ServerError(f"processes still running after stop: {alive}")
        # The logs stay (pytest keeps the last runs' temp dirs); etcd's preallocated WAL need not.
        shutil.rmtree(work / "etcd-data", ignore_errors=True)
