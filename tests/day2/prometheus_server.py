"""A real Prometheus (Debian's package) on loopback, serving blocks backfilled with promtool.

`promtool tsdb create-blocks-from openmetrics` turns an OpenMetrics text into TSDB blocks in the directory
Prometheus then starts on; readiness is polled on /-/ready (no fixed sleeps), and the process is terminated
and waited for when the test is done.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

READY_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.1


def openmetrics(series: Sequence[tuple[str, Mapping[str, str], Sequence[tuple[datetime, float]]]]) -> str:
    """Gauge samples as OpenMetrics text: (metric, labels, [(time, value)]) per series, time-ordered."""
    lines: list[str] = []
    typed: set[str] = set()
    for metric, labels, samples in series:
        if metric not in typed:
            lines.append(f"# TYPE {metric} gauge")
            typed.add(metric)
        rendered = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        lines += [f"{metric}{{{rendered}}} {value:g} {at.timestamp():.0f}" for at, value in samples]
    return "\n".join([*lines, "# EOF"]) + "\n"


def backfill(promtool: str, text: str, directory: Path) -> Path:
    """Blocks for `text` in directory/data, made by promtool."""
    source = directory / "series.om"
    source.write_text(text, encoding="utf-8")
    data = directory / "data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return data


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(url: str, headers: Mapping[str, str] | None = None) -> bool:
    try:
        request = urllib.request.Request(f"{url}/-/ready", headers=dict(headers or {}))
        with urllib.request.urlopen(request, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_prometheus(
    prometheus: str,
    data: Path,
    directory: Path,
    config_text: str | None = None,
    *,
    basic_auth: tuple[str, str] | None = None,
) -> Iterator[str]:
    """Start Prometheus on 127.0.0.1 serving `data`; yields its base URL; stops it (terminate, wait) after.
    `config_text`: its prometheus.yml (default: nothing scraped, nothing evaluated). `basic_auth`: (user, password)
    every request must carry (its web config's basic_auth_users, the password as a bcrypt hash)."""
    config = directory / "prometheus.yml"
    default = "global:\n  scrape_interval: 1m\nscrape_configs: []\n"
    config.write_text(config_text or default, encoding="utf-8")
    web: list[str] = []
    headers: dict[str, str] = {}
    if basic_auth is not None:
        import base64

        import bcrypt

        user, password = basic_auth
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        (directory / "web.yml").write_text(f"basic_auth_users:\n  {user}: '{hashed}'\n", encoding="utf-8")
        web = [f"--web.config.file={directory / 'web.yml'}"]
        headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (directory / "prometheus.log").open("w", encoding="utf-8")
    process = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=3650d",
            f"--web.listen-address=127.0.0.1:{port}",
            *web,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not _ready(url, headers):
            if time.monotonic() > deadline:
                raise TimeoutError(f"Prometheus was not ready within {READY_TIMEOUT_SECONDS:.0f} s; see {log.name}")
            try:
                # The pause between polls doubles as the check that Prometheus has not exited.
                code = process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"Prometheus exited with {code}: {(directory / 'prometheus.log').read_text()[-2000:]}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
