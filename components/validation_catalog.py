"""Every rule the program checks before anything is registered, by kind, under the id docs/validation.md lists it
(tests/test_validation_catalog.py keeps the two in step). Each id maps to the code that enforces it, so a rule
renamed or removed in the code fails the import or the test, not silently the docs."""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Any, Final, get_args

from components.air_gap import air_gap_problems
from components.gpu_failure_domain.host_preflight import datastore_problems, host_check_problems, pci_problems
from components.gpu_failure_domain.turns import rke2_problems
from components.gpu_platform.cluster_objects import (
    namespace_problems,
    rule_selector_problems,
    service_monitor_selector_problems,
)
from components.gpu_platform.cluster_preflight import crd_problems
from components.rendered_plan import RULES
from components.stack_check import validate_stack
from config.cross_key import CROSS_KEY_RULES
from config.run_environment import ENVIRONMENT_RULES, ssh_credential_problems
from config.secret_checks import SHAPES, secret_problems, wrapping_problem
from config.stack import StackConfig
from config.stack_yaml import DuplicateKeyError
from config.validate import number_problems


def _model_of(annotation: Any) -> Any:
    """An optional key's model (`AptMirrorConfig | None` -> AptMirrorConfig): the code its rules live in."""
    return (
        next((arg for arg in get_args(annotation) if arg is not type(None)), annotation)
        if isinstance(annotation, UnionType)
        else annotation
    )


RULES_BY_KIND: Final[Mapping[str, Mapping[str, Any]]] = {
    # How the stack file is written, before any key is read.
    "stack file": {
        "duplicate-key": DuplicateKeyError,
        "leading-zero-integer": number_problems,
        "unknown-key": validate_stack,
    },
    # One key at a time: each top-level key's model carries its own rules (config-reference.md has each key's).
    "single key": {
        (field.alias or name): _model_of(field.annotation) for name, field in StackConfig.model_fields.items()
    },
    "across keys": dict(CROSS_KEY_RULES),
    "rendered plan": {**{rule.id: rule.check for rule in RULES}, "air-gap-served-by-the-lab": air_gap_problems},
    "secrets": {
        "secret-missing": secret_problems,
        "secret-in-plain-text": secret_problems,
        "secret-wrapped-in-quotes-or-whitespace": wrapping_problem,
        **{f"{key}-shape": check for key, (_, check) in SHAPES.items()},
    },
    "this machine": {**dict(ENVIRONMENT_RULES), "ssh-credential-for-snippets": ssh_credential_problems},
    "preflights": {
        "card-at-its-address-alone-in-its-group": pci_problems,
        "card-bound-to-vfio": host_check_problems,
        "datastore-content-types": datastore_problems,
        "crds-served": crd_problems,
        "namespaces-exist": namespace_problems,
        "prometheus-loads-the-alerts": rule_selector_problems,
        "prometheus-scrapes-the-exporter": service_monitor_selector_problems,
        "rke2-version-skew": rke2_problems,
    },
}
