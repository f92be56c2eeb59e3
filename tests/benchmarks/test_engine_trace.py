"""The real-engine breakdown reads the engine's gRPC debug log as the engine writes it (sdk/go/pulumi-internal/
rpcdebug: client calls with their duration in nanoseconds, server entries without a usable time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.engine_case import read_trace
from benchmarks.engine_scale import read_rpc_trace
from benchmarks.settings import BenchError


def _entry(method: str, progress: str, at: str, metadata: dict[str, str], duration: int | None = None) -> str:
    entry: dict[str, object] = {"method": f"/pulumirpc.{method}", "progress": progress, "timestamp": at}
    entry["metadata"] = metadata
    if duration is not None:
        entry["duration"] = duration
    return json.dumps(entry)


LANGUAGE = {"kind": "language", "mode": "client", "runtime": "python"}
K8S = {"kind": "resource", "mode": "client", "name": "kubernetes"}
SERVER = {"mode": "server"}
# What a server-side entry carries for a duration (the interceptor cannot time it).
NEVER = 2**63 - 1


def test_the_program_the_first_plugin_and_each_providers_calls_are_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "grpc.json"
    log.write_text(
        "\n".join(
            [
                _entry("LanguageRuntime/About", "request_started", "2026-12-04T18:32:04.000000Z", LANGUAGE),
                _entry("LanguageRuntime/About", "response_completed", "2026-12-04T18:32:04.100000Z", LANGUAGE, 10**8),
                _entry("LanguageRuntime/Run", "request_started", "2026-12-04T18:32:05.000000Z", LANGUAGE),
                _entry("ResourceMonitor/RegisterResource", "request_started", "0001-01-01T00:00:00Z", SERVER),
                _entry(
                    "ResourceMonitor/RegisterResource", "response_completed", "2026-12-04T18:32:06Z", SERVER, 2**63 - 1
                ),
                _entry("ResourceProvider/Handshake", "request_started", "2026-12-04T18:32:06.500000Z", K8S),
                _entry("ResourceProvider/Check", "response_completed", "2026-12-04T18:32:06.700000Z", K8S, 2 * 10**8),
                _entry("ResourceProvider/Check", "response_completed", "2026-12-04T18:32:06.800000Z", K8S, 10**8),
                _entry("LanguageRuntime/Run", "response_completed", "2026-12-04T18:32:08.000000Z", LANGUAGE, 3 * 10**9),
                # The engine ends each provider once Run has returned: not the program's work.
                _entry("ResourceProvider/Cancel", "response_completed", "2026-12-04T18:32:08.1Z", K8S, 10**6),
            ]
        )
    )

    trace = read_trace(log, wall=4.5)

    assert trace.before_run == pytest.approx(1.0)
    assert trace.run == pytest.approx(3.0)
    assert trace.to_first_plugin == pytest.approx(1.5)
    assert trace.after_last_call == pytest.approx(1.2)
    calls, seconds = trace.rpc[("kubernetes", "Check")]
    assert (calls, round(seconds, 6)) == (2, 0.3)
    calls, seconds = trace.rpc[("language host (python)", "Run")]
    assert (calls, round(seconds, 6)) == (1, 3.0)
    assert ("server", "RegisterResource") not in trace.rpc


def test_a_log_without_the_programs_run_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "grpc.json"
    log.write_text(_entry("LanguageRuntime/About", "request_started", "2026-12-04T18:32:04Z", LANGUAGE) + "\n")

    with pytest.raises(BenchError, match="no Run of the language host"):
        read_trace(log, wall=1.0)


def _call(method: str, at: str, who: dict[str, str], seconds: float, urn: str | None = None) -> str:
    entry = json.loads(_entry(method, "response_completed", at, who, int(seconds * 1e9)))
    if urn is not None:
        entry["request"] = {"urn": urn, "news": {"create": "..."}}
    return json.dumps(entry)


def test_the_scaled_case_reads_each_providers_calls_by_method_and_by_the_type_of_the_resource(
    tmp_path: Path,
) -> None:
    command = {"kind": "resource", "mode": "client", "name": "command"}
    vm = "urn:pulumi:bench::gpu-pool::gpu-pool:proxmox:GpuFailureDomain$proxmoxve:index/vmLegacy:VmLegacy::dc1-vm"
    step = "urn:pulumi:bench::gpu-pool::gpu-pool:proxmox:GpuFailureDomain$command:local:Command::dc1-power-cycle"
    proxmox = {"kind": "resource", "mode": "client", "name": "proxmoxve"}
    log = tmp_path / "grpc.json"
    log.write_text(
        "\n".join(
            [
                _entry("LanguageRuntime/Run", "request_started", "2026-12-04T18:32:05.000000Z", LANGUAGE),
                _call("ResourceProvider/Check", "2026-12-04T18:32:06Z", proxmox, 0.25, vm),
                _call("ResourceProvider/Create", "2026-12-04T18:32:06.1Z", proxmox, 0.5, vm),
                _call("ResourceProvider/Check", "2026-12-04T18:32:06.2Z", command, 0.125, step),
                _call("ResourceProvider/Check", "2026-12-04T18:32:06.3Z", command, 0.125, step),
                _call("ResourceProvider/Configure", "2026-12-04T18:32:06.4Z", command, 0.5),
                _entry("LanguageRuntime/Run", "response_completed", "2026-12-04T18:32:09.000000Z", LANGUAGE, 4 * 10**9),
            ]
        )
    )

    trace = read_rpc_trace(log, wall=5.0)

    assert trace.run == pytest.approx(4.0)
    assert trace.by_method[("command", "Check")][0] == 2
    assert trace.by_method[("command", "Check")][1] == pytest.approx(0.25)
    assert trace.by_method[("command", "Configure")][0] == 1
    assert trace.by_method[("command", "Configure")][1] == pytest.approx(0.5)
    assert trace.by_type[("proxmoxve:index/vmLegacy:VmLegacy", "Create")][0] == 1
    assert trace.by_type[("proxmoxve:index/vmLegacy:VmLegacy", "Create")][1] == pytest.approx(0.5)
    assert trace.by_type[("command:local:Command", "Check")][0] == 2
    assert trace.by_type[("command:local:Command", "Check")][1] == pytest.approx(0.25)
    assert all(method != "Configure" for _, method in trace.by_type)
