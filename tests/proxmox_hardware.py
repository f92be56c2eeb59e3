"""What the Proxmox API (`getPci`) and kubectl (`get crd`) answer the preflights with, under mocks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pulumi.runtime.mocks import MockCallArgs

GET_PCI = "proxmoxve:hardware/getPci:getPci"
GET_DATASTORES = "proxmoxve:index/getDatastores:getDatastores"
LOCAL_RUN = "command:local:run"


def device(
    address: str, vendor: str, device_id: str, group: int, *, subsystem: str = "10de:1757", name: str = ""
) -> dict[str, Any]:
    sub_vendor, sub_device = subsystem.split(":")
    return {
        "id": address,
        "vendor": f"0x{vendor}",
        "device": f"0x{device_id}",
        "subsystemVendor": f"0x{sub_vendor}",
        "subsystemDevice": f"0x{sub_device}",
        "iommuGroup": group,
        "deviceName": name,
        "class": "0x030000",
        "mdev": False,
    }


def ms01_host(*, gpu_group: int = 14, audio_group: int = 14, gpu_at: str = "0000:01:00") -> list[dict[str, Any]]:
    """An MS-01 with an RTX A1000 in its PCIe slot: the card and its audio function alone in a group."""
    return [
        device("0000:00:02.0", "8086", "a7a0", 0, subsystem="8086:7270", name="Raptor Lake-P Iris Xe"),
        device("0000:00:14.0", "8086", "51ed", 9, subsystem="8086:7270", name="USB controller"),
        device(f"{gpu_at}.0", "10de", "25b0", gpu_group, name="GA107GL [RTX A1000]"),
        device(f"{gpu_at}.1", "10de", "2291", audio_group, name="GA107 High Definition Audio"),
    ]


Invoke = Callable[[MockCallArgs], dict[str, Any]]


def datastore(name: str, kind: str, content: str, *, enabled: bool = True, active: bool = True) -> dict[str, Any]:
    """One datastore as the bpg provider's getDatastores gives it (its Read of pve-storage's `GET /nodes/{node}/
    storage`: storage -> id, content -> contentTypes, type, enabled, active, shared)."""
    return {
        "id": name,
        "nodeName": "",
        "type": kind,
        "contentTypes": content.split(","),
        "enabled": enabled,
        "active": active,
        "shared": False,
    }


def pve_storage() -> list[dict[str, Any]]:
    """A default Proxmox install's two datastores, with snippets and import turned on for `local` as
    docs/prerequisites.md asks."""
    return [
        datastore("local", "dir", "backup,import,iso,snippets,vztmpl"),
        datastore("local-lvm", "lvmthin", "images,rootdir"),
    ]


ALL_CRDS = (
    "servicemonitors.monitoring.coreos.com",
    "prometheusrules.monitoring.coreos.com",
    "mutatingpolicies.policies.kyverno.io",
    "generatingpolicies.policies.kyverno.io",
    # kyverno.enabled: the multi-GPU refusal is a ValidatingPolicy.
    "validatingpolicies.policies.kyverno.io",
)
# What each CRD serves and stores on a cluster with Kyverno 1.19 and the Prometheus Operator (their v1.19.0 and
# v0.93.0 CRDs: the policies.kyverno.io types serve v1alpha1, v1beta1 and v1, storing v1beta1).
SERVED: dict[str, tuple[str, str]] = {
    "servicemonitors.monitoring.coreos.com": ("v1", "v1"),
    "prometheusrules.monitoring.coreos.com": ("v1", "v1"),
    "clusterpolicies.kyverno.io": ("v1,v2beta1", "v1"),
    "mutatingpolicies.policies.kyverno.io": ("v1alpha1,v1beta1,v1", "v1beta1"),
    "generatingpolicies.policies.kyverno.io": ("v1alpha1,v1beta1,v1", "v1beta1"),
    "validatingpolicies.policies.kyverno.io": ("v1alpha1,v1beta1,v1", "v1beta1"),
    # Node Feature Discovery's own CRD (its chart's crds/nfd-api-crds.yaml), on a cluster that runs an NFD.
    "nodefeatures.nfd.k8s-sigs.io": ("v1alpha1", "v1alpha1"),
}


def crd_listing(
    crds: tuple[str, ...] = ALL_CRDS, exit_code: int = 0, versions: dict[str, tuple[str, str]] | None = None
) -> str:
    """What `kubectl get crd ... --ignore-not-found --no-headers -o custom-columns=NAME,SERVED,STORED` prints."""
    table = {**SERVED, **(versions or {})}
    return "".join(f"{crd}   {table[crd][0]}   {table[crd][1]}\n" for crd in crds) + f"kubectl-exit={exit_code}\n"


# The namespaces prod puts objects in without creating them, plus what every cluster has.
PROD_NAMESPACES = ("default", "kube-system", "katib-sweeps", "cattle-monitoring-system", "cattle-dashboards")


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Namespace as the API server lists it (it labels each with kubernetes.io/metadata.name)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def object_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def cluster_namespaces(names: tuple[str, ...] = PROD_NAMESPACES) -> dict[str, Any]:
    return object_list([namespace(name) for name in names])


def prometheus(
    name: str,
    ns: str,
    rule_selector: Any,
    rule_namespace_selector: Any = None,
    *,
    monitor_selector: Any = None,
    monitor_namespace_selector: Any = None,
) -> dict[str, Any]:
    """A Prometheus object; a selector left None is absent (null), as the Prometheus Operator reads it."""
    spec: dict[str, Any] = {"ruleSelector": rule_selector}
    if rule_namespace_selector is not None:
        spec["ruleNamespaceSelector"] = rule_namespace_selector
    if monitor_selector is not None:
        spec["serviceMonitorSelector"] = monitor_selector
    if monitor_namespace_selector is not None:
        spec["serviceMonitorNamespaceSelector"] = monitor_namespace_selector
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def prometheus_loading_every_rule() -> dict[str, Any]:
    """Rancher Monitoring's: every selector empty, so every PrometheusRule and ServiceMonitor in every namespace."""
    return prometheus(
        "rancher-monitoring-prometheus",
        "cattle-monitoring-system",
        {},
        {},
        monitor_selector={},
        monitor_namespace_selector={},
    )


def answering(
    tables: dict[str, list[dict[str, Any]]] | None = None,
    host_check_stdout: str = "vfio-pci\n24\n",
    crd_stdout: str | None = None,
    namespaces_stdout: dict[str, Any] | None = None,
    prometheuses_stdout: dict[str, Any] | None = None,
    cluster_nodes: list[dict[str, Any]] | None = None,
    server_version: str | None = None,
    existing: list[dict[str, Any]] | None = None,
    deployments: list[dict[str, Any]] | None = None,
    storage: dict[str, list[dict[str, Any]]] | None = None,
) -> Invoke:
    """An invoke handler: getPci per node (default: a good MS-01 everywhere), local.run for the host check, for
    the cluster's CRDs (default: all present), its Nodes (default: none, a first install) and its version."""

    def invoke(args: MockCallArgs) -> dict[str, Any]:
        if args.token == GET_PCI:
            node = args.args.get("nodeName", "")
            return {"devices": (tables or {}).get(node, ms01_host()), "nodeName": node, "id": node}
        if args.token == GET_DATASTORES:
            node = args.args.get("nodeName", "")
            stores = [{**d, "nodeName": node} for d in (storage or {}).get(node, pve_storage())]
            return {"datastores": stores, "nodeName": node, "id": node}
        if args.token == LOCAL_RUN:
            command = str(args.args.get("command", ""))
            if " get namespaces " in command:
                # By default the cluster has every namespace asked for (`get namespaces a b --ignore-not-found`).
                asked = command.split(" get namespaces ", 1)[1].split(" --ignore-not-found")[0].split()
                namespaces = namespaces_stdout or cluster_namespaces(tuple(asked))
                return {"stdout": json.dumps(namespaces), "stderr": "kubectl-exit=0"}
            if " --show-managed-fields " in command:
                # The objects the plan creates that the cluster has (default: none, a first install); kubectl
                # answers each namespace's query with the ones asked for in it.
                scope = command.split(" -n ", 1)[1].split()[0] if " -n " in command else None
                there = [o for o in existing or [] if o.get("metadata", {}).get("namespace") == scope]
                return {"stdout": json.dumps(object_list(there)), "stderr": "kubectl-exit=0"}
            if " get deployments -A " in command:
                return {"stdout": json.dumps(object_list(deployments or [])), "stderr": "kubectl-exit=0"}
            if " get prometheuses." in command:
                prometheuses = prometheuses_stdout or object_list([prometheus_loading_every_rule()])
                return {"stdout": json.dumps(prometheuses), "stderr": "kubectl-exit=0"}
            if " get nodes -o json" in command:
                listing = json.dumps({"kind": "List", "apiVersion": "v1", "items": cluster_nodes or []})
                return {"stdout": f"{listing}\nkubectl-exit=0\n", "stderr": "", "command": command}
            if " version -o json" in command:
                answer = {"serverVersion": {"gitVersion": server_version}} if server_version else {}
                return {"stdout": json.dumps(answer), "stderr": "", "command": command}
            stdout = (
                (crd_listing(tuple(SERVED)) if crd_stdout is None else crd_stdout)
                if " get crd " in command
                else host_check_stdout
            )
            return {"stdout": stdout, "stderr": "", "command": command}
        raise NotImplementedError(f"no mock answer for {args.token}")

    return invoke
