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
