"""What Kubeflow's notebook controller sets, so a GPU held by a notebook can be named and freed.

Checked in kubeflow/kubeflow components/notebook-controller (controllers/notebook_controller.go, culler):
the StatefulSet's pod template is labelled `notebook-name: <Notebook name>`, and a Notebook carrying the
`kubeflow-resource-stopped` annotation is scaled to zero replicas (what the UI's "stop" and the culler do).
"""

from __future__ import annotations

from typing import Final

NOTEBOOK_NAME_LABEL: Final = "notebook-name"
NOTEBOOK_KIND: Final = "Notebook"
NOTEBOOK_RESOURCE: Final = "notebook"
STOP_ANNOTATION: Final = "kubeflow-resource-stopped"
# The profile controller annotates each profile's namespace with its owner (Profile.spec.owner.name, the user's
# email): kubeflow/kubeflow components/profile-controller/controllers/profile_controller.go (commit 52d55bef),
# `Annotations: map[string]string{"owner": instance.Spec.Owner.Name}`, and it checks that annotation before it
# takes over an existing namespace.
PROFILE_OWNER_ANNOTATION: Final = "owner"


def stop_notebook_command(namespace: str, name: str) -> str:
    """The article's command: stop a notebook (scale to zero); its volume and files stay."""
    return (
        f"kubectl -n {namespace} annotate {NOTEBOOK_RESOURCE} {name} "
        f'{STOP_ANNOTATION}="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --overwrite'
    )


# The Notebook custom resource (the CRD's storage version, config/crd/bases/kubeflow.org_notebooks.yaml of
# kubeflow/notebooks v1.11.0 components/notebook-controller; v1alpha1 and v1beta1 are served beside it).
NOTEBOOK_GROUP: Final = "kubeflow.org"
NOTEBOOK_VERSION: Final = "v1"
NOTEBOOK_PLURAL: Final = "notebooks"
# Kubeflow's own culler (controllers/culling_controller.go): what it records from Jupyter's /api/kernels, and the
# time format it writes the stop annotation in (time.RFC3339).
LAST_ACTIVITY_ANNOTATION: Final = "notebooks.kubeflow.org/last-activity"
STOP_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def notebooks_path(namespace: str | None = None) -> str:
    """The API path of the Notebooks of a namespace, or of every namespace."""
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{NOTEBOOK_GROUP}/{NOTEBOOK_VERSION}{where}/{NOTEBOOK_PLURAL}"
