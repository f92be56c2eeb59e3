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


def stop_notebook_command(namespace: str, name: str) -> str:
    """The article's command: stop a notebook (scale to zero); its volume and files stay."""
    return (
        f"kubectl -n {namespace} annotate {NOTEBOOK_RESOURCE} {name} "
        f'{STOP_ANNOTATION}="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --overwrite'
    )
