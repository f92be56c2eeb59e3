"""The vendored gpu-operator chart, packaged with its real version and rendered with a stack's release values."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kube import Kubectl, load_documents, rejections
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed
from tests.environ import process_environment

CHART_VERSION = "v26.7.0"
CHART_DIR = f"gpu-operator/{CHART_VERSION}/chart"
RELEASE_RESOURCE = "gpu-platform-gpu-operator"


def helm(tools: Tools, work: Path, *args: str) -> str:
    # Helm's own cache, config and data stay in the test's folder, not the user's home.
    homes = {f"HELM_{kind}_HOME": str(work / "helm" / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    done = subprocess.run(
        [str(tools.helm), *args], env={**process_environment(), **homes}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"helm {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


def package_chart(tools: Tools, upstream: Path, work: Path, version: str = CHART_VERSION) -> Path:
    """In git the chart says v1.0.0-devel / main-latest; NVIDIA's release stamps the tag into both, and the operator
    image tag defaults to appVersion (upstream README, gpu-operator/v26.7.0/chart)."""
    stamp = ("--version", version, "--app-version", version)
    helm(tools, work, "package", *stamp, str(upstream / f"gpu-operator/{version}/chart"), "-d", str(work))
    return work / f"gpu-operator-{version}.tgz"


@dataclass(frozen=True)
class Rendered:
    stack: Previewed
    # What `helm template` rendered, and the same objects as the API server would store them (defaults applied,
    # unknown fields pruned) according to its dry-run.
    objects: list[dict[str, Any]]
    stored: list[dict[str, Any]]
    problems: list[str]

    def find(self, kind: str, name: str, *, stored: bool = False) -> dict[str, Any]:
        found = [
            o for o in (self.stored if stored else self.objects) if (o["kind"], o["metadata"]["name"]) == (kind, name)
        ]
        assert len(found) == 1, f"{len(found)} {kind} {name} in the {'stored' if stored else 'rendered'} objects"
        return found[0]


def render_release(stack: Previewed, tools: Tools, kubectl: Kubectl, archive: Path, work: Path) -> Rendered:
    """`helm template` with exactly the values the stack's Release carries, then a server-side dry-run of all of it
    (as Helm's install creates the objects) in the release namespace, which the stack creates first."""
    release = stack.resource(RELEASE_RESOURCE)["inputs"]
    assert release["version"] == CHART_VERSION, (
        f"the release pins {release['version']}, the vendored chart is {CHART_VERSION}"
    )
    namespace = release["namespace"]
    values = work / "values.yaml"
    values.write_text(yaml.safe_dump(release["values"]))
    server = kubectl.json("version")["serverVersion"]["gitVersion"]
    rendered = work / "rendered.yaml"
    template = ("template", release["name"], str(archive), "--namespace", namespace, "--values", str(values))
    rendered.write_text(helm(tools, work, *template, "--kube-version", server))
    kubectl.create_namespaces([stack.out / "manifests" / f"namespace-{namespace}.yaml"])
    done = kubectl.run("create", "--dry-run=server", "--namespace", namespace, "-f", str(rendered), "-o", "yaml")
    problems = rejections([(f"helm template {release['name']} ({stack.name})", done)])
    return Rendered(stack, load_documents(rendered.read_text()), load_documents(done.stdout), problems)
