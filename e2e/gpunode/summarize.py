#!/usr/bin/env python3
"""What the GPU node run showed, from the objects it saved (run.sh's collect step): summary.json and a text table.

    summarize.py RUN_DIR OBJECTS_DIR
Standard library only: it runs on the GPU machine, and again here on the imported fixture.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def main() -> None:
    run, objects = Path(sys.argv[1]), Path(sys.argv[2])
    node_spec = _json(objects / "node.json")
    node = _json(run / "node.json")
    status = node.get("status", {})
    summary: dict = {
        "node": node.get("metadata", {}).get("name"),
        "kubelet": status.get("nodeInfo", {}).get("kubeletVersion"),
        "containerRuntime": status.get("nodeInfo", {}).get("containerRuntimeVersion"),
        "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])),
        "gpuCapacity": status.get("capacity", {}).get("nvidia.com/gpu"),
        "gpuAllocatable": status.get("allocatable", {}).get("nvidia.com/gpu"),
        "slotsExpected": node_spec.get("slots"),
        "pods": {},
        "pending": [],
        "toolkitIgnoredErrors": [],
    }
    for path in sorted((run / "pods").glob("*.json")):
        pod = _json(path)
        log = (
            (run / "pods" / (path.stem + ".log")).read_text(errors="replace")
            if (run / "pods" / (path.stem + ".log")).exists()
            else ""
        )
        summary["pods"][path.stem] = {
            "phase": pod.get("status", {}).get("phase"),
            "uuids": sorted(set(UUID.findall(log))),
            "testPassed": "Test PASSED" in log,
            "exitCodes": [
                c.get("state", {}).get("terminated", {}).get("exitCode")
                for c in pod.get("status", {}).get("containerStatuses", [])
            ],
        }
    for pod in _json(run / "pending.json").get("items", []):
        for condition in pod["status"].get("conditions", []):
            if condition["type"] == "PodScheduled":
                summary["pending"].append(
                    {
                        "pod": pod["metadata"]["name"],
                        "status": condition["status"],
                        "reason": condition.get("reason"),
                        "message": condition.get("message"),
                    }
                )
    path = run / "toolkit-path.txt"
    summary["toolkitPath"] = path.read_text().strip() if path.exists() else None
    report = _json(run / "node-check-job-report.json")
    summary["nodeCheckJob"] = {
        "node": report.get("node"),
        "floors": {f["name"]: f.get("ok") for f in report.get("floors", [])},
        "firstBroken": report.get("firstBroken"),
    }
    toolkit_log = run / "logs" / "toolkit.log"
    if toolkit_log.exists():
        summary["toolkitIgnoredErrors"] = [
            line.strip() for line in toolkit_log.read_text(errors="replace").splitlines() if "Ignoring error" in line
        ]
    (run / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
