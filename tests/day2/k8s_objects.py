"""Real-shaped Kubernetes objects as the API server returns them (`kubectl get -o json`), for the day-2 tests.

Only fields that exist in the Kubernetes 1.33 API: every object is validated strictly against that schema
(`validated`), so a misspelt or invented field fails the test that builds it instead of passing silently.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import kubernetes_validate

KUBERNETES_VERSION = "1.33"
# The moment every scenario is seen at: ages are relative to it, and `--now` passes it to the tool.
NOW = datetime(2026, 5, 4, 10, 0, 0, tzinfo=UTC)
NOW_TEXT = "2026-05-04T10:00:00Z"
Obj = dict[str, Any]


def at(ago: timedelta) -> str:
    """The RFC 3339 time `ago` before NOW, as the API server writes it."""
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def suffix(*parts: str, length: int = 5) -> str:
    """A pod-name suffix like the controllers generate (consonants and digits)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int(digest(*parts), 16)
    return "".join(alphabet[(number >> (5 * i)) % len(alphabet)] for i in range(length))


@cache
def _validate_text(text: str) -> None:
    kubernetes_validate.validate(json.loads(text), KUBERNETES_VERSION, strict=True)


def validated(obj: Obj) -> Obj:
    """The object, after a strict validation against the Kubernetes 1.33 schema (cached per distinct object)."""
    _validate_text(json.dumps(obj, sort_keys=True))
    return obj


def dump(objects: list[Obj]) -> Obj:
    """What `kubectl get nodes,pods,configmaps,jobs -A -o json` writes: a List of validated objects."""
    return {
        "apiVersion": "v1",
        "items": [validated(copy.deepcopy(o)) for o in objects],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


def _condition(kind: str, status: bool, ago: timedelta, reason: str = "", message: str = "") -> Obj:
    condition: Obj = {"type": kind, "status": "True" if status else "False", "lastTransitionTime": at(ago)}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def node(
    name: str,
    *,
    labels: dict[str, str],
    taints: list[Obj] | None = None,
    gpus: str | None = None,
    ready: bool = True,
    age: timedelta = timedelta(days=120),
    ip: str = "10.10.21.51",
) -> Obj:
    capacity = {"cpu": "8", "ephemeral-storage": "123727180Ki", "memory": "32855948Ki", "pods": "110"}
    allocatable = {"cpu": "8", "ephemeral-storage": "120362168538", "memory": "32855948Ki", "pods": "110"}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = gpus
        allocatable["nvidia.com/gpu"] = gpus
    heartbeat = timedelta(seconds=20)
    pressure = [
        {
            **_condition(kind, False, age, f"KubeletHas{'Sufficient' if kind != 'PIDPressure' else 'No'}{kind[:-8]}"),
            "lastHeartbeatTime": at(heartbeat),
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    ready_condition = {
        **_condition(
            "Ready",
            ready,
            timedelta(minutes=4) if not ready else age,
            "KubeletReady" if ready else "NodeStatusUnknown",
            "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
        ),
        "lastHeartbeatTime": at(heartbeat if ready else timedelta(minutes=5)),
    }
    spec: Obj = {"podCIDR": "10.42.1.0/24", "podCIDRs": ["10.42.1.0/24"], "providerID": f"rke2://{name}"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "resourceVersion": "918273",
            "creationTimestamp": at(age),
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **labels,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "rke2.io/hostname": name},
        },
        "spec": spec,
        "status": {
            "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [*pressure, ready_condition],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid("boot", name),
                "containerRuntimeVersion": "containerd://2.1.4-k3s2",
                "kernelVersion": "6.8.0-79-generic",
                "kubeProxyVersion": "v1.33.5+rke2r1",
                "kubeletVersion": "v1.33.5+rke2r1",
                "machineID": digest("machine", name)[:32],
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.3 LTS",
                "systemUUID": uid("system", name),
            },
        },
    }


def taint(key: str, value: str, effect: str) -> Obj:
    return {"key": key, "value": value, "effect": effect}


def container(
    name: str, image: str, *, limits: dict[str, str] | None = None, requests: dict[str, str] | None = None
) -> Obj:
    c: Obj = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    resources: Obj = {}
    if limits:
        resources["limits"] = limits
    if requests or limits:
        # The API server defaults requests from limits; an explicit request wins.
        resources["requests"] = {**(limits or {}), **(requests or {})}
    c["resources"] = resources
    return c


def job_spec_defaults(job_uid: str) -> Obj:
    """The fields the API server defaults on a non-indexed Job, and the selector it generates from the Job's uid."""
    return {
        "completionMode": "NonIndexed",
        "completions": 1,
        "manualSelector": False,
        "parallelism": 1,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": job_uid}},
        "suspend": False,
    }


def qos_class(containers: list[Obj]) -> str:
    """The QoS class the API server computes (and refuses to have changed): from cpu and memory only."""
    compute = ("cpu", "memory")
    requests = [c.get("resources", {}).get("requests", {}) for c in containers]
    limits = [c.get("resources", {}).get("limits", {}) for c in containers]
    if not any(r in x for x in [*requests, *limits] for r in compute):
        return "BestEffort"
    guaranteed = all(
        r in lim and req.get(r, lim[r]) == lim[r] for req, lim in zip(requests, limits, strict=True) for r in compute
    )
    return "Guaranteed" if guaranteed else "Burstable"


def running(name: str, image: str, since: timedelta, *, restarts: int = 0, ready: bool = True) -> Obj:
    return {
        "name": name,
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{digest('image', image)}",
        "containerID": f"containerd://{digest('container', name, image, str(since))}",
        "ready": ready,
        "restartCount": restarts,
        "started": True,
        "state": {"running": {"startedAt": at(since)}},
    }


def completed(name: str, image: str, since: timedelta) -> Obj:
    return {
        "name": name,
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{digest('image', image)}",
        "containerID": f"containerd://{digest('container', name, image, 'done')}",
        "ready": True,
        "restartCount": 0,
        "started": False,
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": at(since),
                "finishedAt": at(since - timedelta(seconds=20)),
                "containerID": f"containerd://{digest('container', name, image, 'done')}",
            }
        },
    }


def waiting(name: str, image: str, reason: str, message: str = "", *, restarts: int = 0) -> Obj:
    state: Obj = {"reason": reason}
    if message:
        state["message"] = message
    status: Obj = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": False,
        "restartCount": restarts,
        "started": False,
        "state": {"waiting": state},
    }
    return status


def crash_looping(name: str, image: str, pod: str, *, exit_code: int, reason: str, restarts: int) -> Obj:
    """A container in CrashLoopBackOff whose last run ended with exit_code/reason."""
    status = waiting(
        name,
        image,
        "CrashLoopBackOff",
        f"back-off 5m0s restarting failed container={name} pod={pod}_gpu-operator({uid('pod', pod)})",
        restarts=restarts,
    )
    status["imageID"] = f"{image.rsplit(':', 1)[0]}@sha256:{digest('image', image)}"
    status["containerID"] = f"containerd://{digest('container', name, pod, 'last')}"
    status["lastState"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": at(timedelta(minutes=6)),
            "finishedAt": at(timedelta(minutes=3)),
            "containerID": f"containerd://{digest('container', name, pod, 'last')}",
        }
    }
    return status


def pod_conditions(
    *,
    scheduled: timedelta | None,
    initialized: bool = True,
    ready: bool = True,
    succeeded: bool = False,
    message: str = "",
) -> list[Obj]:
    """The five conditions of a bound pod (1.33), or PodScheduled=False with the scheduler's message."""
    if scheduled is None:
        return [_condition("PodScheduled", False, timedelta(minutes=9), "Unschedulable", message)]
    started = scheduled - timedelta(seconds=5)
    if succeeded:
        return [
            _condition("PodReadyToStartContainers", False, started),
            _condition("Initialized", True, started, "PodCompleted"),
            _condition("Ready", False, started, "PodCompleted"),
            _condition("ContainersReady", False, started, "PodCompleted"),
            _condition("PodScheduled", True, scheduled),
        ]
    return [
        _condition("PodReadyToStartContainers", True, started),
        _condition("Initialized", initialized, started, "" if initialized else "ContainersNotInitialized"),
        _condition("Ready", ready, started, "" if ready else "ContainersNotReady"),
        _condition("ContainersReady", ready, started, "" if ready else "ContainersNotReady"),
        _condition("PodScheduled", True, scheduled),
    ]


def pod(
    name: str,
    namespace: str,
    *,
    containers: list[Obj],
    statuses: list[Obj],
    phase: str,
    conditions: list[Obj],
    age: timedelta,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,
    init_containers: list[Obj] | None = None,
    init_statuses: list[Obj] | None = None,
    tolerations: list[Obj] | None = None,
    daemonset_node: str | None = None,
    deleting_for: timedelta | None = None,
    node_selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    security_context: Obj | None = None,
    restart_policy: str = "Always",
) -> Obj:
    """A pod; owner is (apiVersion, kind, name) of its controller; daemonset_node pins it as the DS controller does."""
    metadata: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": uid("pod", namespace, name),
        "resourceVersion": "918311",
        "creationTimestamp": at(age),
        "labels": labels or {},
    }
    if annotations:
        metadata["annotations"] = annotations
    if owner is not None:
        api_version, kind, owner_name = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": owner_name,
                "uid": uid(kind, namespace, owner_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if deleting_for is not None:
        metadata["deletionTimestamp"] = at(deleting_for - timedelta(seconds=30))
        metadata["deletionGracePeriodSeconds"] = 30
    spec: Obj = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": restart_policy,
        "schedulerName": "default-scheduler",
        "securityContext": security_context or {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            *(tolerations or []),
        ],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if daemonset_node:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [daemonset_node]}]}
                    ]
                }
            }
        }
    status: Obj = {
        "phase": phase,
        "conditions": conditions,
        "qosClass": qos_class([*containers, *(init_containers or [])]),
    }
    if node_name:
        status.update({"hostIP": "10.10.21.51", "hostIPs": [{"ip": "10.10.21.51"}], "startTime": at(age)})
        if phase != "Pending" or init_statuses:
            status.update({"podIP": "10.42.1.17", "podIPs": [{"ip": "10.42.1.17"}]})
    if statuses:
        status["containerStatuses"] = statuses
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
