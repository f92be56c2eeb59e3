"""The day-2 scenarios as dumps: a healthy pool, the article's notebooks, and a broken floor each.

The article's lab: three GPU workers (one RTX A1000 each, one per "datacenter") and a server, the GPU Operator
in gpu-operator, smoke Jobs in gpu-smoke-test. The healthy pool follows Pulumi.prod.yaml (dc1, dc2 time-sliced
x4, dc3 whole); the notebooks scenario is the article's moment before time-slicing (three whole cards).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from components.gpu_failure_domain.smoke_test import build_smoke_job, validated_stack
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP, build_time_slicing_config
from config.sharing import SharingProfile
from config.smoke_test import SmokeTestConfig
from knowledge.gpu_operator import (
    GPU_COUNT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    GPU_SHARING_STRATEGY_LABEL,
    SHARED_PRODUCT_SUFFIX,
)
from tests.day2 import workloads
from tests.day2.k8s_objects import (
    NOW,
    Obj,
    at,
    container,
    digest,
    job_spec_defaults,
    node,
    pod,
    pod_conditions,
    suffix,
    taint,
    uid,
)
from tests.day2.operator_pods import (
    DCGM_EXPORTER,
    DEVICE_PLUGIN,
    DRIVER,
    GFD,
    OPERATOR_NS,
    TOOLKIT,
    VALIDATOR,
    healthy_operands,
    operand_pod,
    operator_deployment_pod,
)
from tests.plugin_recording import gfd_labels, shape

SERVER = "rke2-server-1"
NODES = {"dc1": "rke2-worker-dc1-gpu-a", "dc2": "rke2-worker-dc2-gpu-a", "dc3": "rke2-worker-dc3-gpu-a"}
PROD_SHARING = {"dc1": "a1000-x4", "dc2": "a1000-x4", "dc3": "whole"}
ALL_WHOLE = {"dc1": "whole", "dc2": "whole", "dc3": "whole"}
PROFILES = {"a1000-x4": 4, "whole": 1}
# GFD's product label for the lab's card (the NVML name, spaces as dashes).
A1000_PRODUCT = "NVIDIA-RTX-A1000"
H200_PRODUCT = "NVIDIA-H200"
GPU_TAINT = taint("nvidia.com/gpu", "true", "NoSchedule")


def gfd_sharing_labels(replicas: int, model: str = A1000_PRODUCT) -> dict[str, str]:
    """GFD's count and sharing labels for one card under the program's profile of `replicas`: as GFD wrote them on
    the H200 (tests/fixtures/deviceplugin/h200/gfd), with the lab's card model in place of the H200's."""
    recorded = gfd_labels(shape(SharingProfile(replicas=replicas)))
    h200 = recorded[GPU_PRODUCT_LABEL].removesuffix(SHARED_PRODUCT_SUFFIX)
    keys = (GPU_COUNT_LABEL, GPU_REPLICAS_LABEL, GPU_SHARING_STRATEGY_LABEL)
    return {key: recorded[key] for key in keys} | {GPU_PRODUCT_LABEL: model + recorded[GPU_PRODUCT_LABEL][len(h200) :]}


def gpu_node(
    domain: str,
    profile: str,
    *,
    gpus: str | None = "default",
    ready: bool = True,
    gfd_replicas: int | None = None,
    model: str = A1000_PRODUCT,
) -> Obj:
    """A GPU worker; `gfd_replicas`: the replicas GFD last labelled it under (default: its profile's)."""
    slots = str(PROFILES.get(profile, 0)) if gpus == "default" else gpus
    # A node labelled with a profile the ConfigMap lacks has no GFD sharing labels of its own: its GFD never started.
    labelled = gfd_replicas or PROFILES.get(profile)
    gfd = gfd_sharing_labels(labelled, model) if labelled else {GPU_PRODUCT_LABEL: model}
    return node(
        NODES[domain],
        labels={
            "nodepool": "gpu",
            "topology.kubernetes.io/zone": domain,
            "nvidia.com/device-plugin.config": profile,
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "nvidia.com/gpu.present": "true",
            **gfd,
            "nvidia.com/gpu.deploy.driver": "true",
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        },
        taints=[GPU_TAINT],
        gpus=slots,
        ready=ready,
        ip=f"10.10.2{domain[-1]}.51",
    )


def server_node() -> Obj:
    return node(
        SERVER,
        labels={"node-role.kubernetes.io/control-plane": "true", "node-role.kubernetes.io/etcd": "true"},
        taints=[taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")],
        ip="10.10.20.11",
    )


def time_slicing_configmap(profiles: dict[str, int] = PROFILES) -> Obj:
    """The program's own ConfigMap data (components/gpu_platform/time_slicing.py)."""
    data = build_time_slicing_config({name: SharingProfile(replicas=r) for name, r in profiles.items()})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": TIME_SLICING_CONFIGMAP,
            "namespace": OPERATOR_NS,
            "uid": uid("configmap", TIME_SLICING_CONFIGMAP),
            "resourceVersion": "4411",
            "creationTimestamp": at(timedelta(days=120)),
            "labels": {"app.kubernetes.io/managed-by": "pulumi"},
        },
        "data": data,
    }


def root_ca_configmap(namespace: str) -> Obj:
    """Every namespace has one; doctor must not mistake it for anything."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kube-root-ca.crt",
            "namespace": namespace,
            "uid": uid("configmap", namespace, "kube-root-ca.crt"),
            "resourceVersion": "311",
            "creationTimestamp": at(timedelta(days=120)),
            "annotations": {"kubernetes.io/description": "Contains a CA bundle for verifying the API server."},
        },
        "data": {
            "ca.crt": (
                "-----BEGIN CERTIFICATE-----\n"
                "MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhya2Uy\n"
                "-----END CERTIFICATE-----\n"
            )
        },
    }


def smoke_job(domain: str, *, outcome: str = "Complete", age: timedelta = timedelta(days=20)) -> Obj:
    """The program's own smoke Job (components/gpu_failure_domain/smoke_test.py) with the status a run leaves."""
    cfg = SmokeTestConfig()
    validated = validated_stack(
        chart_version="v26.3.2",
        driver_version="570.211.01",
        node=NODES[domain],
        device="10de:25b0",
        image=cfg.image,
        kernel=f"6.8.0-{79 + int(age.days < 10)}-generic",
    )
    job = build_smoke_job(domain, cfg, validated)
    meta = job["metadata"]
    job_uid = uid("job", meta["namespace"], meta["name"])
    meta.update({"uid": job_uid, "resourceVersion": "77120", "generation": 1, "creationTimestamp": at(age)})
    ids = {"batch.kubernetes.io/controller-uid": job_uid, "batch.kubernetes.io/job-name": meta["name"]}
    job["spec"].update(job_spec_defaults(job_uid))
    job["spec"]["template"]["metadata"]["labels"].update({**ids, "controller-uid": job_uid, "job-name": meta["name"]})
    started, finished = at(age), at(age - timedelta(seconds=47))
    if outcome == "Complete":
        conditions = [
            {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": finished, "lastTransitionTime": finished},
            {"type": "Complete", "status": "True", "lastProbeTime": finished, "lastTransitionTime": finished},
        ]
        job["status"] = {"conditions": conditions, "startTime": started, "completionTime": finished, "succeeded": 1}
    else:
        message = "Job has reached the specified backoff limit"
        conditions = [
            {
                "type": kind,
                "status": "True",
                "lastProbeTime": finished,
                "lastTransitionTime": finished,
                "reason": "BackoffLimitExceeded",
                "message": message,
            }
            for kind in ("FailureTarget", "Failed")
        ]
        job["status"] = {"conditions": conditions, "startTime": started, "failed": 2}
    job["status"].update({"ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
    return job


def smoke_pod(job: Obj) -> Obj:
    """The pod a finished smoke Job leaves behind (no TTL): it asked for a GPU, and holds none any more."""
    name = job["metadata"]["name"]
    template = job["spec"]["template"]
    spec = template["spec"]
    finished = job["status"].get("completionTime") or job["status"]["startTime"]
    age = NOW - datetime.fromisoformat(job["status"]["startTime"])
    cuda = spec["containers"][0]
    ok = "succeeded" in job["status"]
    terminated = {
        "exitCode": 0 if ok else 1,
        "reason": "Completed" if ok else "Error",
        "startedAt": job["status"]["startTime"],
        "finishedAt": finished,
        "containerID": f"containerd://{digest('smoke', name)}",
    }
    status = {
        "name": cuda["name"],
        "image": cuda["image"],
        "imageID": f"{cuda['image'].rsplit(':', 1)[0]}@sha256:{digest('image', cuda['image'])}",
        "containerID": terminated["containerID"],
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"terminated": terminated},
    }
    return pod(
        f"{name}-{suffix(name)}",
        job["metadata"]["namespace"],
        containers=[container(cuda["name"], cuda["image"], limits=cuda["resources"]["limits"])],
        statuses=[status],
        phase="Succeeded" if ok else "Failed",
        conditions=pod_conditions(scheduled=age, succeeded=True),
        age=age,
        node_name=spec["nodeSelector"]["kubernetes.io/hostname"],
        labels=template["metadata"]["labels"],
        owner=("batch/v1", "Job", name),
        node_selector=spec["nodeSelector"],
        restart_policy="Never",
        security_context=spec["securityContext"],
    )


def pool(sharing: dict[str, str], *, smoke: dict[str, str] | None = None) -> list[Obj]:
    """Nodes, the ConfigMaps, every operand healthy on every GPU node, and a passed smoke Job per domain."""
    objects: list[Obj] = [server_node(), *(gpu_node(d, p) for d, p in sharing.items())]
    objects += [time_slicing_configmap(), root_ca_configmap(OPERATOR_NS), root_ca_configmap("gpu-smoke-test")]
    objects.append(operator_deployment_pod())
    for domain in sharing:
        objects += healthy_operands(NODES[domain])
    for domain in sharing:
        outcome = (smoke or {}).get(domain, "Complete")
        if outcome == "Failed":
            objects.append(smoke_job(domain, outcome="Complete", age=timedelta(days=20)))
        newest = smoke_job(
            domain, outcome=outcome, age=timedelta(days=2) if outcome == "Failed" else timedelta(days=20)
        )
        objects += [newest, smoke_pod(newest)]
    return objects


def replaced(objects: list[Obj], *new: Obj) -> list[Obj]:
    """The objects with each of `new` put in place of the object of the same kind, namespace and name."""

    def key(o: Obj) -> tuple[str, str, str]:
        return o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]

    by_key = {key(o): o for o in new}
    assert set(by_key) <= {key(o) for o in objects}, "replacing an object that is not there"
    return [by_key.get(key(o), o) for o in objects]


def healthy_pool() -> list[Obj]:
    """Pulumi.prod.yaml come true: every floor of every GPU node works; an inference Deployment holds a slot."""
    return [*pool(PROD_SHARING), *workloads.inference_deployment_pod(NODES["dc1"]), workloads.cpu_pod(SERVER)]


def notebooks(*, stopped_pod_gone: bool = False) -> list[Obj]:
    """The article: two notebooks hold whole A1000s at low CPU (one for 3.5 months), a Katib trial the third,
    the next trial waits; the newer notebook was just stopped and its pod is still Terminating."""
    objects = pool(ALL_WHOLE)
    objects.append(
        workloads.notebook_pod("team-vision", "resnet-lab", NODES["dc1"], cpu="600m", age=timedelta(days=105))
    )
    if not stopped_pod_gone:
        objects.append(
            workloads.notebook_pod(
                "team-nlp",
                "llm-scratch",
                NODES["dc2"],
                cpu="1200m",
                age=timedelta(days=12),
                deleting_for=timedelta(seconds=40),
            )
        )
    objects += workloads.katib_trial("lr-sweep", "lr-sweep-8h6k2nqz", NODES["dc3"], age=timedelta(hours=30))
    objects += workloads.katib_trial("lr-sweep", "lr-sweep-q9w4m7tx", None, age=timedelta(minutes=9))
    return objects


def broken_driver() -> list[Obj]:
    """dc2's driver is OOM-killed compiling the module (trap 1); everything above it sits in Init."""
    dc2 = NODES["dc2"]
    objects = replaced(
        pool(PROD_SHARING, smoke={"dc2": "Failed"}),
        gpu_node("dc2", "a1000-x4", gpus=None),
        operand_pod(DRIVER, dc2, "oom-crashloop", age=timedelta(minutes=52)),
        operand_pod(TOOLKIT, dc2, "stuck-init", age=timedelta(minutes=52)),
        operand_pod(DEVICE_PLUGIN, dc2, "stuck-init", age=timedelta(minutes=52)),
        operand_pod(DCGM_EXPORTER, dc2, "stuck-init", age=timedelta(minutes=52)),
        operand_pod(GFD, dc2, "stuck-init", age=timedelta(minutes=52)),
        operand_pod(VALIDATOR, dc2, "stuck-init", age=timedelta(minutes=52)),
    )
    return objects


def missing_profile() -> list[Obj]:
    """dc1 is labelled with a profile the time-slicing ConfigMap does not have: its card advertises 0."""
    dc1 = NODES["dc1"]
    return replaced(
        pool(PROD_SHARING),
        gpu_node("dc1", "a1000-x8", gpus="0"),
        operand_pod(DEVICE_PLUGIN, dc1, "init-crashloop", stuck_at=1, age=timedelta(minutes=14)),
    )


def zero_gpus() -> list[Obj]:
    """dc3's operands all look fine, yet the node advertises 0 nvidia.com/gpu."""
    return replaced(pool(PROD_SHARING), gpu_node("dc3", "whole", gpus="0"))


def failed_smoke() -> list[Obj]:
    """Every floor of dc1 up to the exporter is fine, but its newest smoke Job failed."""
    return pool(PROD_SHARING, smoke={"dc1": "Failed"})


def untolerated_device_plugin() -> list[Obj]:
    """Trap 11: a trimmed values file dropped the GPU toleration; the device plugin is Pending on dc3."""
    message = (
        "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 node(s) had untolerated "
        "taint {nvidia.com/gpu: true}. preemption: 0/4 nodes are available: 4 Preemption is not helpful for "
        "scheduling."
    )
    return replaced(
        pool(PROD_SHARING),
        gpu_node("dc3", "whole", gpus=None),
        operand_pod(
            DEVICE_PLUGIN, NODES["dc3"], "unschedulable", message=message, age=timedelta(minutes=9), tolerate_gpu=False
        ),
    )


def stale_gfd_labels() -> list[Obj]:
    """a1000-x4 edited in place from 4 slots a card to 1 (the cards whole again) and `pulumi up` run: both device
    plugins reloaded, dc2's GPU Feature Discovery too, but dc1's did not and still labels the card of the 4-slot
    profile (FIELD-REVIEW-4 WRONG-5)."""
    return replaced(
        pool(PROD_SHARING),
        time_slicing_configmap({"a1000-x4": 1, "whole": 1}),
        gpu_node("dc1", "a1000-x4", gpus="1"),
        gpu_node("dc2", "a1000-x4", gpus="1", gfd_replicas=1),
    )


def h200_lab() -> list[Obj]:
    """The healthy pool with dc2 on the lent H200 (examples/day2/Pulumi.h200-lab.yaml): what `gpu-pool repair` reads
    beside the H200's node-check report (docs/day2.md)."""
    return replaced(healthy_pool(), gpu_node("dc2", "a1000-x4", model=H200_PRODUCT))


SCENARIOS: dict[str, Callable[[], list[Obj]]] = {
    "healthy-pool": healthy_pool,
    "notebooks": notebooks,
    "notebooks-stopped": lambda: notebooks(stopped_pod_gone=True),
    "broken-driver": broken_driver,
    "missing-profile": missing_profile,
    "zero-gpus": zero_gpus,
    "failed-smoke": failed_smoke,
    "untolerated-device-plugin": untolerated_device_plugin,
    "stale-gfd-labels": stale_gfd_labels,
    "h200-lab": h200_lab,
}
# The scenarios committed under examples/day2/ for users and the docs.
EXAMPLES = ("healthy-pool", "notebooks", "broken-driver", "stale-gfd-labels", "h200-lab")
