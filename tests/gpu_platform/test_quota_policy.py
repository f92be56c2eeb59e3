"""The quota generate policy, evaluated by the Kyverno model: which namespaces get which quota, what reaches Kyverno."""

from __future__ import annotations

import itertools
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from components.gpu_platform.cel_policies import build_gpu_quota_generating_policies
from components.gpu_platform.quota_policy import QUOTA_POLICY_NAME, build_gpu_quota_generate_policy
from components.gpu_platform.quotas import build_gpu_quotas
from tests.gpu_platform.kyverno_admission import Cluster, generated, namespace_request, quota_request, webhook_called
from tests.gpu_platform.quota_rules import KUBEFLOW, KUBEFLOW_LABELS, TEAM, TEAM_LABELS, namespace, quotas


@pytest.fixture(scope="module")
def quota_policy() -> dict[str, Any]:
    policy = build_gpu_quota_generate_policy(quotas(selectors=[KUBEFLOW, TEAM]))
    assert policy is not None
    return policy


def test_the_generate_policy_has_one_rule_per_selector_each_matching_namespaces_by_labels(
    quota_policy: dict[str, Any],
) -> None:
    assert quota_policy["metadata"]["name"] == QUOTA_POLICY_NAME
    assert [r["name"] for r in quota_policy["spec"]["rules"]] == ["kubeflow-profiles", "research"]
    assert quota_policy["spec"]["rules"][1]["match"] == {
        "any": [{"resources": {"kinds": ["Namespace"], "selector": {"matchLabels": TEAM_LABELS}}}]
    }


def test_each_rule_generates_a_synchronised_gpu_quota_in_existing_namespaces_too(quota_policy: dict[str, Any]) -> None:
    assert quota_policy["spec"]["background"] is True
    for rule in quota_policy["spec"]["rules"]:
        generate = rule["generate"]
        assert generate["synchronize"] is True
        assert generate["generateExisting"] is True
        assert (generate["apiVersion"], generate["kind"]) == ("v1", "ResourceQuota")
        assert generate["namespace"] == "{{request.object.metadata.name}}"
    # The rule-level field, not the deprecated spec-level one.
    assert "generateExisting" not in quota_policy["spec"]


def test_a_labelled_namespace_gets_its_rules_quota_in_itself(quota_policy: dict[str, Any]) -> None:
    made = generated(quota_policy, namespace("alice", KUBEFLOW_LABELS))
    assert made == [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {
                "labels": {
                    "app.kubernetes.io/part-of": "gpu-pool",
                    "app.kubernetes.io/managed-by": "kyverno",
                    "generate.kyverno.io/policy-name": QUOTA_POLICY_NAME,
                    "generate.kyverno.io/rule-name": "kubeflow-profiles",
                },
                "name": "gpu-quota-kubeflow-profiles",
                "namespace": "alice",
            },
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
        }
    ]


def test_a_namespace_matching_two_rules_gets_two_quotas_so_the_smaller_cap_wins(quota_policy: dict[str, Any]) -> None:
    labels = {**KUBEFLOW_LABELS, **TEAM_LABELS}
    made = generated(quota_policy, namespace("bob", labels))
    assert sorted(q["metadata"]["name"] for q in made) == ["gpu-quota-kubeflow-profiles", "gpu-quota-research"]
    assert min(int(q["spec"]["hard"]["requests.nvidia.com/gpu"]) for q in made) == 1


def test_a_namespace_with_only_some_of_a_rules_labels_gets_no_quota(quota_policy: dict[str, Any]) -> None:
    assert generated(quota_policy, namespace("carol", {"example.org/team": "research"})) == []


def test_only_labelled_namespaces_are_sent_to_kyverno_so_an_outage_blocks_nothing_else(
    quota_policy: dict[str, Any],
) -> None:
    assert webhook_called(quota_policy, namespace_request(namespace("alice", KUBEFLOW_LABELS)))
    assert webhook_called(quota_policy, namespace_request(namespace("bob", TEAM_LABELS), "UPDATE"))
    assert not webhook_called(quota_policy, namespace_request(namespace("carol", {"example.org/team": "research"})))
    assert not webhook_called(
        quota_policy, namespace_request({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d"}})
    )
    assert not webhook_called(quota_policy, namespace_request(None, "DELETE"))


def test_the_generate_policy_fails_closed_by_default_and_declares_its_minimum_kyverno(
    quota_policy: dict[str, Any],
) -> None:
    assert quota_policy["spec"]["webhookConfiguration"]["failurePolicy"] == "Fail"
    assert quota_policy["metadata"]["annotations"]["policies.kyverno.io/minversion"] == "1.13.0"
    relaxed = build_gpu_quota_generate_policy(quotas(selectors=[KUBEFLOW], failurePolicy="Ignore"))
    assert relaxed is not None and relaxed["spec"]["webhookConfiguration"]["failurePolicy"] == "Ignore"


# --- synchronize: what the real Kyverno can only do if the API server sends it the events ------------------

QUOTA = "gpu-quota-kubeflow-profiles"


def test_a_deleted_gpu_quota_is_put_back(quota_policy: dict[str, Any]) -> None:
    cluster = Cluster(quota_policy)
    cluster.put_namespace("alice", KUBEFLOW_LABELS)
    cluster.delete_quota("alice", QUOTA)
    assert cluster.quotas[("alice", QUOTA)]["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}


def test_an_edited_gpu_quota_is_reset_to_the_rules_cap(quota_policy: dict[str, Any]) -> None:
    cluster = Cluster(quota_policy)
    cluster.put_namespace("alice", KUBEFLOW_LABELS)
    cluster.edit_quota("alice", QUOTA, {"requests.nvidia.com/gpu": "10"})
    assert cluster.quotas[("alice", QUOTA)]["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}


def test_the_quota_goes_when_the_namespace_loses_its_labels(quota_policy: dict[str, Any]) -> None:
    cluster = Cluster(quota_policy)
    cluster.put_namespace("alice", KUBEFLOW_LABELS)
    cluster.put_namespace("alice", {"team": "alice"})
    assert ("alice", QUOTA) not in cluster.quotas


def test_without_the_quota_events_in_its_filter_synchronize_could_restore_nothing(quota_policy: dict[str, Any]) -> None:
    # The filter this project shipped before: labelled namespaces only. Kyverno never heard of the delete.
    old_filter = {
        "name": "labelled-for-gpu-quota",
        "expression": "request.operation != 'DELETE' && has(object.metadata.labels) && "
        "('app.kubernetes.io/part-of' in object.metadata.labels && "
        "object.metadata.labels['app.kubernetes.io/part-of'] == 'kubeflow-profile')",
    }
    shipped = {
        **quota_policy,
        "spec": {**quota_policy["spec"], "webhookConfiguration": {"matchConditions": [old_filter]}},
    }
    cluster = Cluster(shipped)
    cluster.put_namespace("alice", KUBEFLOW_LABELS)
    cluster.delete_quota("alice", QUOTA)
    assert ("alice", QUOTA) not in cluster.quotas


def test_namespaces_labelled_before_the_policy_get_their_quota_from_generate_existing(
    quota_policy: dict[str, Any],
) -> None:
    cluster = Cluster(quota_policy)
    cluster.namespaces["alice"] = namespace("alice", KUBEFLOW_LABELS)
    cluster.namespaces["default"] = namespace("default", {"team": "platform"})
    cluster.install_policy()
    assert set(cluster.quotas) == {("alice", QUOTA)}


def test_kyverno_checks_the_match_conditions_again_in_the_background_with_an_empty_operation(
    quota_policy: dict[str, Any],
) -> None:
    """The filter this project shipped before admitted only CREATE and UPDATE of a namespace: a running Kyverno
    1.19.1 then skipped the rule in its background controller, so nothing labelled before the policy got a quota
    and no deleted quota came back (tests/e2e/test_kyverno_running.py found it)."""
    (condition,) = quota_policy["spec"]["webhookConfiguration"]["matchConditions"]
    before = {
        **condition,
        "expression": condition["expression"].replace("['CREATE', 'UPDATE', '']", "['CREATE', 'UPDATE']"),
    }
    assert before != condition
    shipped = {**quota_policy, "spec": {**quota_policy["spec"], "webhookConfiguration": {"matchConditions": [before]}}}
    cluster = Cluster(shipped)
    cluster.namespaces["bob"] = namespace("bob", KUBEFLOW_LABELS)
    cluster.install_policy()
    assert cluster.quotas == {}
    cluster.put_namespace("alice", KUBEFLOW_LABELS)
    cluster.delete_quota("alice", QUOTA)
    assert ("alice", QUOTA) not in cluster.quotas
    # An empty operation never comes from the API server: the webhook is called for nothing more.
    assert not webhook_called(quota_policy, namespace_request(namespace("carol", {"team": "x"}), operation=""))


def test_quotas_kyverno_did_not_generate_and_unlabelled_namespaces_never_reach_it(quota_policy: dict[str, Any]) -> None:
    pulumi_owned = {
        "metadata": {"name": "gpu-quota", "namespace": "katib", "labels": {"app.kubernetes.io/part-of": "gpu-pool"}}
    }
    assert not webhook_called(quota_policy, quota_request("DELETE", None, pulumi_owned))
    cluster = Cluster(quota_policy)
    cluster.put_namespace("default", {"team": "platform"})
    cluster.put_namespace("default", {"team": "ops"})
    assert cluster.sent == []


def test_a_quota_failure_policy_with_cel_policies_is_a_warning_that_it_does_nothing(prod_config) -> None:
    from components.stack_check import validate_stack
    from config.cross_key import config_warnings

    prod_config["gpu-pool:gpuQuotas"]["failurePolicy"] = "Ignore"
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    assert any(w.startswith("gpu-pool:gpuQuotas.failurePolicy: has no effect") for w in config_warnings(cfg))
    prod_config["gpu-pool:kyverno"] = {"policyApi": "clusterpolicy"}
    cfg = validate_stack({k.split(":", 1)[1]: v for k, v in prod_config.items()})
    assert not any("failurePolicy" in w for w in config_warnings(cfg))


# --- an explicit gpuQuotas.namespaces entry wins over a label rule -------------------------------------------------

EXPLICIT = {"alice": 3}


@pytest.fixture(scope="module")
def precedence_policy() -> dict[str, Any]:
    policy = build_gpu_quota_generate_policy(quotas(namespaces=EXPLICIT, selectors=[KUBEFLOW, TEAM]))
    assert policy is not None
    return policy


def gpu_quotas_in(namespace_name: str, cluster: Cluster, config: Any) -> list[str]:
    """Every GPU ResourceQuota the namespace ends up with: Pulumi's explicit one, and Kyverno's."""
    pulumi = [q["metadata"]["name"] for q in build_gpu_quotas(config) if q["metadata"]["namespace"] == namespace_name]
    kyverno = [name for (ns, name) in cluster.quotas if ns == namespace_name]
    return pulumi + kyverno


def test_a_profile_namespace_with_an_explicit_quota_gets_none_from_the_label_rule(
    precedence_policy: dict[str, Any],
) -> None:
    config = quotas(namespaces=EXPLICIT, selectors=[KUBEFLOW, TEAM])
    cluster = Cluster(precedence_policy)
    cluster.put_namespace("alice", {**KUBEFLOW_LABELS, **TEAM_LABELS})
    cluster.put_namespace("bob", KUBEFLOW_LABELS)

    assert generated(precedence_policy, namespace("alice", KUBEFLOW_LABELS)) == []
    assert gpu_quotas_in("alice", cluster, config) == ["gpu-quota"]
    assert gpu_quotas_in("bob", cluster, config) == ["gpu-quota-kubeflow-profiles"]
    # The explicit namespace's events never reach Kyverno: Pulumi owns its quota.
    assert cluster.sent == ["CREATE Namespace"]


def test_an_explicit_namespace_labelled_before_the_policy_gets_no_generated_quota(
    precedence_policy: dict[str, Any],
) -> None:
    cluster = Cluster(precedence_policy)
    cluster.namespaces["alice"] = namespace("alice", KUBEFLOW_LABELS)
    cluster.install_policy()

    assert cluster.quotas == {}


LABEL_SETS: tuple[dict[str, str], ...] = ({}, KUBEFLOW_LABELS, TEAM_LABELS, {**KUBEFLOW_LABELS, **TEAM_LABELS})
# Every way two namespaces can be explicit or not, labelled for none, one or both rules, or not yet created (None).
WORLDS = [
    (
        frozenset(name for name, on in zip(("alice", "bob"), flags, strict=True) if on),
        dict(zip(("alice", "bob"), labels, strict=True)),
    )
    for flags in itertools.product((False, True), repeat=2)
    for labels in itertools.product((None, *LABEL_SETS), repeat=2)
]


@pytest.mark.parametrize(("explicit", "labelled"), WORLDS)
def test_every_explicit_namespace_has_exactly_one_gpu_quota_whatever_its_labels(
    explicit: frozenset[str], labelled: dict[str, dict[str, str] | None]
) -> None:
    config = quotas(namespaces=dict.fromkeys(explicit, 2), selectors=[KUBEFLOW, TEAM])
    policy = build_gpu_quota_generate_policy(config)
    assert policy is not None
    cluster = Cluster(policy)
    for name, labels in labelled.items():
        if labels is not None:
            cluster.put_namespace(name, labels)
    cluster.install_policy()

    for name in explicit:
        assert gpu_quotas_in(name, cluster, config) == ["gpu-quota"], name
    for name, labels in labelled.items():
        if name not in explicit and labels is not None:
            expected = len([r for r in (KUBEFLOW_LABELS, TEAM_LABELS) if r.items() <= labels.items()])
            assert len(gpu_quotas_in(name, cluster, config)) == expected, name


@pytest.mark.parametrize(("name", "reaches"), [("alice", False), ("bob", True)])
def test_the_cel_generating_policies_skip_an_explicit_namespace_too(name: str, reaches: bool) -> None:
    policies = build_gpu_quota_generating_policies(quotas(namespaces=EXPLICIT, selectors=[KUBEFLOW, TEAM]))
    env = celpy.Environment()
    activation = {"object": json_to_cel(namespace(name, KUBEFLOW_LABELS))}

    assert len(policies) == 2
    for policy in policies:
        (condition,) = [c for c in policy["spec"]["matchConditions"] if c["name"] == "no-explicit-gpu-quota"]
        assert bool(env.program(env.compile(condition["expression"])).evaluate(activation)) is reaches


def test_without_explicit_namespaces_the_cel_condition_lets_every_namespace_through() -> None:
    (policy,) = build_gpu_quota_generating_policies(quotas(selectors=[KUBEFLOW]))
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}

    assert conditions["no-explicit-gpu-quota"] == "!false"
