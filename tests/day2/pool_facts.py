"""PoolFacts written back as the health check's facts document: the inverse of day2.pool.facts_from_document, for
the tests that hold the two to a round trip. The program writes the document from the config alone
(components/gpu_platform/health_check.py: pool_facts_document)."""

from __future__ import annotations

from typing import Any

from day2.pool import PoolFacts


def facts_document(facts: PoolFacts) -> dict[str, Any]:
    """What `--stack` tells doctor, as the JSON the stack writes into the health check's ConfigMap."""
    return {
        "stack": facts.stack,
        "marking": facts.marking.as_document(),
        "operatorNamespace": facts.operator_namespace,
        "smokeNamespace": facts.smoke_namespace,
        "smokeTestEnabled": facts.smoke_test_enabled,
        "timeSlicingConfigMap": facts.time_slicing_configmap,
        "domains": [
            {"name": d.name, "hostname": d.hostname, "sharing": d.sharing, "slots": d.slots, "cards": list(d.cards)}
            for d in facts.domains
        ],
        "profileSlots": dict(sorted(facts.profile_slots.items())),
        "driverVersion": facts.driver_version,
    }
