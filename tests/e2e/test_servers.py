"""The e2e servers are the builds e2e/ pins, and the admin kubeconfig can do anything."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from offline.runner import ROOT_DIR
from tests.e2e.conftest import UPSTREAM_CRDS
from tests.e2e.kube import Kubectl
from tests.e2e.kyverno_cli import Kyverno
from tests.e2e.servers import Tools

E2E_DIR = ROOT_DIR / "e2e"


def pinned(go_mod: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    assert match, f"{module} is not required in {go_mod}"
    return match.group(1)


def test_the_api_server_and_kubectl_are_the_pinned_kubernetes_release(kubectl: Kubectl) -> None:
    versions = kubectl.json("version")
    expected = pinned(E2E_DIR / "go.mod", "k8s.io/kubernetes")
    assert versions["serverVersion"]["gitVersion"] == versions["clientVersion"]["gitVersion"] == expected


def test_etcd_and_helm_are_the_pinned_releases(e2e_tools: Tools) -> None:
    etcd = subprocess.run([str(e2e_tools.etcd), "--version"], capture_output=True, text=True, check=True).stdout
    helm = subprocess.run(
        [str(e2e_tools.helm), "version", "--template", "{{.Version}}"], capture_output=True, text=True, check=True
    ).stdout
    assert f"etcd Version: {pinned(E2E_DIR / 'etcd' / 'go.mod', 'go.etcd.io/etcd/server/v3').removeprefix('v')}" in etcd
    assert helm == pinned(E2E_DIR / "helm" / "go.mod", "helm.sh/helm/v4")


def test_the_kyverno_cli_is_the_pinned_release_whose_crd_the_tier_installs(e2e_tools: Tools, tmp_path: Path) -> None:
    expected = pinned(E2E_DIR / "kyverno" / "go.mod", "github.com/kyverno/kyverno")
    assert Kyverno(e2e_tools.kyverno).version(tmp_path) == expected
    # ../shared/upstream holds the v1.19.0 CRDs. The v1.19.1 module's config/crds has the same three
    # policies.kyverno.io files byte for byte, and the same ClusterPolicy schema with only `deprecated: true` and a
    # deprecationWarning added to both served versions (compared on the module the Go proxy serves, 2026-12-03).
    crd_release = {"v1.19.0": "v1.19.0", "v1.19.1": "v1.19.0"}[expected]
    assert f"kyverno/{crd_release}/kyverno.io_clusterpolicies.yaml" in UPSTREAM_CRDS
    assert f"kyverno/{crd_release}/policies.kyverno.io_mutatingpolicies.yaml" in UPSTREAM_CRDS


def test_the_admin_kubeconfig_may_do_anything(kubectl: Kubectl) -> None:
    assert kubectl("auth", "can-i", "*", "*", "--all-namespaces").strip() == "yes"
