"""`make chart STACK=<name>`: the stack's pinned gpu-operator chart on disk, for `gpuOperator.chart`.

Why a command and not the program: the program never reaches the network by itself (an offline preview must work
with no lab), yet registering the chart's CRDs needs the chart's bytes. `helm pull` of the pinned version, once, on a
machine with access to the repository, gives the archive an air-gapped lab copies along with the project.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from config.arguments import ArgumentParser
from config.gpu_operator import GpuOperatorConfig
from knowledge.gpu_operator_chart import CHART_NAME
from offline.runner import StackFileError, read_stack_file

CHARTS_DIR = Path("charts")


def pull_command(cfg: GpuOperatorConfig, helm: str, out: Path) -> list[str]:
    return [helm, "pull", CHART_NAME, "--repo", cfg.chart_repository, "--version", cfg.chart_version, "-d", str(out)]


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="make chart", description=__doc__)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--out", type=Path, default=CHARTS_DIR)
    args = parser.parse_args(argv)
    try:
        section = dict(read_stack_file(args.stack).get("gpu-pool:gpuOperator") or {})
    except StackFileError as error:
        print(error, file=sys.stderr)
        return 2
    # Only the pin and the repository matter here; a chart path the stack names may not exist yet.
    cfg = GpuOperatorConfig.model_validate(
        {k: v for k, v in section.items() if k in ("chartVersion", "chartRepository", "driverVersion")}
        | {"allowUnsupportedDriver": True}
    )
    helm = shutil.which("helm")
    if helm is None:
        print("make chart needs helm on PATH (https://helm.sh/docs/intro/install/)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(pull_command(cfg, helm, args.out), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"helm pull failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    archive = args.out / f"{CHART_NAME}-{cfg.chart_version}.tgz"
    print(f"wrote {archive}: set it as the chart of stack {args.stack!r}:")
    print(f"  gpu-pool:gpuOperator:\n    chart: {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
