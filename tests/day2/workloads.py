"""Pods that ask for GPUs, shaped as their controllers create them: Kubeflow notebooks, Katib trials, a
Deployment, and a CPU pod that must not count."""

from __future__ import annotations

from datetime import timedelta

from tests.day2.k8s_objects import Obj, at, container, job_spec_defaults, pod, pod_conditions, running, suffix, uid

# Kyverno's steering policy adds this to every GPU pod (components/gpu_platform/steering_policy.py).
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
NOTEBOOK_IMAGE = "kubeflownotebookswg/jupyter-pytorch-cuda-full:v1.9.0"
TRIAL_IMAGE = "ghcr.io/example/lr-sweep-trainer:2026.04"
COLLECTOR_IMAGE = "docker.io/kubeflowkatib/file-metrics-collector:v0.17.0"


def notebook_pod(
    namespace: str, notebook: str, node: str, *, cpu: str, age: timedelta, deleting_for: timedelta | None = None
) -> Obj:
    """A Kubeflow Notebook's pod: StatefulSet <notebook>, pod <notebook>-0, labelled notebook-name (the notebook
    controller's template), one whole GPU and a low CPU request."""
    name = f"{notebook}-0"
    revision = f"{notebook}-{suffix('rev', notebook, length=10)}"
    gpu = {"nvidia.com/gpu": "1"}
    main = container(
        notebook, NOTEBOOK_IMAGE, limits={**gpu, "cpu": cpu, "memory": "8Gi"}, requests={"cpu": cpu, "memory": "4Gi"}
    )
    main["ports"] = [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}]
    main["workingDir"] = "/home/jovyan"
    return pod(
        name,
        namespace,
        containers=[main],
        statuses=[running(notebook, NOTEBOOK_IMAGE, age)],
        phase="Running",
        conditions=pod_conditions(scheduled=age),
        age=age,
        node_name=node,
        labels={
            "app": notebook,
            "apps.kubernetes.io/pod-index": "0",
            "controller-revision-hash": revision,
            "notebook-name": notebook,
            "statefulset": notebook,
            "statefulset.kubernetes.io/pod-name": name,
        },
        owner=("apps/v1", "StatefulSet", notebook),
        tolerations=[GPU_TOLERATION],
        deleting_for=deleting_for,
        security_context={"fsGroup": 100},
    )


def katib_trial(experiment: str, trial: str, node: str | None, *, age: timedelta) -> list[Obj]:
    """A Katib trial run as a batch Job (owned by its Trial) and its pod: bound and running, or Pending."""
    job_uid = uid("job", "katib-sweeps", trial)
    ids = {
        "batch.kubernetes.io/controller-uid": job_uid,
        "batch.kubernetes.io/job-name": trial,
        "controller-uid": job_uid,
        "job-name": trial,
    }
    labels = {"katib.kubeflow.org/experiment": experiment, "katib.kubeflow.org/trial": trial}
    trainer = container("training", TRIAL_IMAGE, limits={"nvidia.com/gpu": "1", "cpu": "4", "memory": "12Gi"})
    collector = container(
        "metrics-logger-and-collector",
        COLLECTOR_IMAGE,
        limits={"cpu": "500m", "memory": "100Mi"},
        requests={"cpu": "50m", "memory": "16Mi"},
    )
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": trial,
            "namespace": "katib-sweeps",
            "uid": job_uid,
            "resourceVersion": "90211",
            "generation": 1,
            "creationTimestamp": at(age),
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Trial",
                    "name": trial,
                    "uid": uid("trial", trial),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            **job_spec_defaults(job_uid),
            "template": {
                "metadata": {"labels": {**labels, **ids}},
                "spec": {"containers": [trainer, collector], "restartPolicy": "Never", "tolerations": [GPU_TOLERATION]},
            },
        },
        "status": {
            "active": 1,
            "ready": 1 if node else 0,
            "startTime": at(age),
            "terminating": 0,
            "uncountedTerminatedPods": {},
        },
    }
    name = f"{trial}-{suffix(trial)}"
    if node is None:
        message = (
            "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
            "3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 1 Preemption is not helpful for "
            "scheduling, 3 No preemption victims found for incoming pod."
        )
        trial_pod = pod(
            name,
            "katib-sweeps",
            containers=[trainer, collector],
            statuses=[],
            phase="Pending",
            conditions=pod_conditions(scheduled=None, message=message),
            age=age,
            labels={**labels, **ids},
            owner=("batch/v1", "Job", trial),
            tolerations=[GPU_TOLERATION],
            restart_policy="Never",
        )
    else:
        trial_pod = pod(
            name,
            "katib-sweeps",
            containers=[trainer, collector],
            statuses=[
                running("training", TRIAL_IMAGE, age),
                running("metrics-logger-and-collector", COLLECTOR_IMAGE, age),
            ],
            phase="Running",
            conditions=pod_conditions(scheduled=age),
            age=age,
            node_name=node,
            labels={**labels, **ids},
            owner=("batch/v1", "Job", trial),
            tolerations=[GPU_TOLERATION],
            restart_policy="Never",
        )
    return [job, trial_pod]


def inference_deployment_pod(node: str) -> list[Obj]:
    """A Deployment's pod holding one time-sliced slot, with a healthy CPU request."""
    template_hash = "7f8d9c6b5d"
    image = "nvcr.io/nvidia/tritonserver:25.03-py3"
    age = timedelta(days=3)
    server = container(
        "triton", image, limits={"nvidia.com/gpu": "1", "memory": "6Gi"}, requests={"cpu": "2", "memory": "6Gi"}
    )
    return [
        pod(
            f"triton-{template_hash}-{suffix('triton')}",
            "ml-serving",
            containers=[server],
            statuses=[running("triton", image, age)],
            phase="Running",
            conditions=pod_conditions(scheduled=age),
            age=age,
            node_name=node,
            labels={"app.kubernetes.io/name": "triton", "pod-template-hash": template_hash},
            owner=("apps/v1", "ReplicaSet", f"triton-{template_hash}"),
            tolerations=[GPU_TOLERATION],
        )
    ]


def cpu_pod(node: str) -> Obj:
    image = "docker.io/library/postgres:17.4"
    age = timedelta(days=40)
    return pod(
        "postgres-0",
        "data",
        containers=[container("postgres", image, limits={"memory": "2Gi"}, requests={"cpu": "500m", "memory": "1Gi"})],
        statuses=[running("postgres", image, age)],
        phase="Running",
        conditions=pod_conditions(scheduled=age),
        age=age,
        node_name=node,
        labels={"app": "postgres", "statefulset.kubernetes.io/pod-name": "postgres-0"},
        owner=("apps/v1", "StatefulSet", "postgres"),
    )
