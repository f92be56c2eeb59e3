"""The quota generate policy, as the previews write it, run by the real Kyverno engine and the real API server."""

from __future__ import annotations

import yaml

from components.gpu_platform.quota_policy import GENERATED_BY_LABEL, QUOTA_POLICY_NAME
from tests.day2.k8s_objects import validated
from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.kyverno_cases import (
    Obj,
    Runs,
    combinable_rules,
    explicit_quota_namespaces,
    namespace,
    policy_path,
    quota_namespaces,
    the_policy,
)
from tests.e2e.kyverno_cli import PASS
from tests.e2e.match_conditions import Probe, webhook_rule
from tests.e2e.stacks import Previewed
from tests.gpu_platform import kyverno_admission

# --------------------------------------------------------------------------------------------------------
# The quota generate policy
# --------------------------------------------------------------------------------------------------------


def by_place(quotas: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in quotas}


def test_a_namespace_with_a_rules_labels_gets_that_rules_gpu_quota_with_its_cap(stack: Previewed, runs: Runs) -> None:
    quotas = stack.config.gpu_quotas
    applied = runs.quotas(stack)
    made = by_place(applied.generated(QUOTA_POLICY_NAME))
    for rule in quotas.selectors:
        quota = made[(f"only-{rule.name}", f"{quotas.quota_name}-{rule.name}")]
        assert (quota["apiVersion"], quota["kind"]) == ("v1", "ResourceQuota")
        assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": str(rule.max_gpus)}}
        assert quota["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-pool"
        # What the quota filter keys on to send Kyverno edits and deletes of this quota (synchronize).
        assert quota["metadata"]["labels"][GENERATED_BY_LABEL] == QUOTA_POLICY_NAME
        # Only the rule whose labels match runs for the namespace; the others never match it.
        assert applied.rules("Namespace", f"only-{rule.name}") == {rule.name: PASS}


def test_a_namespace_matching_several_rules_gets_one_quota_per_rule(stack: Previewed, runs: Runs) -> None:
    name = stack.config.gpu_quotas.quota_name
    made = by_place(runs.quotas(stack).generated(QUOTA_POLICY_NAME))
    several = {quota: q["spec"]["hard"] for (ns, quota), q in made.items() if ns == "several-rules"}
    assert several == {
        f"{name}-{rule.name}": {"requests.nvidia.com/gpu": str(rule.max_gpus)} for rule in combinable_rules(stack)
    }


def test_namespaces_without_all_of_a_rules_labels_get_no_quota_and_match_no_rule(stack: Previewed, runs: Runs) -> None:
    applied = runs.quotas(stack)
    selectors = stack.config.gpu_quotas.selectors
    places = {ns for ns, _ in by_place(applied.generated(QUOTA_POLICY_NAME))}
    assert places == {f"only-{rule.name}" for rule in selectors} | {"several-rules"}
    for name in [*(f"almost-{rule.name}" for rule in selectors), "unlabelled"]:
        assert applied.rules("Namespace", name) == {}, name


def test_an_explicit_quota_namespace_a_rule_also_matches_gets_no_generated_quota(stack: Previewed, runs: Runs) -> None:
    explicit = {ns["metadata"]["name"] for ns in explicit_quota_namespaces(stack)}
    applied = runs.quotas(stack)
    places = {ns for ns, _ in by_place(applied.generated(QUOTA_POLICY_NAME))}

    assert explicit, f"{stack.name}: no explicit quota namespace that a selector rule could match"
    assert not places & explicit, sorted(places & explicit)
    for name in explicit:
        assert applied.rules("Namespace", name) == {}, name


def test_the_python_model_generates_the_same_quotas_as_kyverno(stack: Previewed, runs: Runs) -> None:
    policy = the_policy(policy_path(stack, QUOTA_POLICY_NAME))
    modelled = by_place([q for ns in quota_namespaces(stack) for q in kyverno_admission.generated(policy, ns)])
    real = by_place(runs.quotas(stack).generated(QUOTA_POLICY_NAME))
    assert sorted(real) == sorted(modelled)
    for place, quota in real.items():
        assert quota["spec"] == modelled[place]["spec"], place
        # Kyverno adds more labels (the trigger's kind, version, uid...); every label the model predicts is there.
        labels = quota["metadata"]["labels"]
        assert {k: labels.get(k) for k in modelled[place]["metadata"]["labels"]} == modelled[place]["metadata"][
            "labels"
        ], place


def test_the_api_server_accepts_every_quota_kyverno_generates(stack: Previewed, runs: Runs, kubectl: Kubectl) -> None:
    problems = []
    for quota in runs.quotas(stack).generated(QUOTA_POLICY_NAME):
        validated(quota)
        kubectl.ensure_namespace(quota["metadata"]["namespace"])
        done = kubectl.run("create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(quota))
        if done.returncode != 0:
            problems.append(f"{quota['metadata']['namespace']}/{quota['metadata']['name']}: {done.stderr.strip()}")
    assert not problems, "\n".join(problems)


def test_the_api_server_sends_kyverno_labelled_namespaces_their_label_loss_and_changes_to_generated_quotas_only(
    stack: Previewed, runs: Runs, kubectl: Kubectl
) -> None:
    policy = the_policy(policy_path(stack, QUOTA_POLICY_NAME))
    rule = stack.config.gpu_quotas.selectors[0]
    probe = Probe(kubectl)
    suffix = f"{stack.name}-{probe.token}"
    # Before the probe: a labelled namespace that will lose its labels, with the quota Kyverno generated for it, and
    # a quota Pulumi owns (the stack's explicit namespaces) beside it.
    losing = probe.label(namespace(f"losing-{suffix}", dict(rule.match_labels)))
    kubectl.create(losing, field_manager="e2e-setup")
    generated = by_place(runs.quotas(stack).generated(QUOTA_POLICY_NAME))[
        (f"only-{rule.name}", f"{stack.config.gpu_quotas.quota_name}-{rule.name}")
    ]
    generated["metadata"]["namespace"] = losing["metadata"]["name"]
    kubectl.create(probe.label(generated), field_manager="e2e-setup")
    pulumis = next(d for p in stack.manifests() for d in load_documents(p.read_text()) if d["kind"] == "ResourceQuota")
    pulumis["metadata"]["namespace"] = losing["metadata"]["name"]
    kubectl.create(probe.label(pulumis), field_manager="e2e-setup")
    try:
        rules = [webhook_rule("namespaces", "CREATE", "UPDATE"), webhook_rule("resourcequotas", "UPDATE", "DELETE")]
        control = namespace(f"control-{suffix}", dict(rule.match_labels))
        ns = losing["metadata"]["name"]
        with probe.webhook(policy, rules, control=control):
            sent = {
                "labelled namespace created": probe.create_reaches_kyverno(
                    namespace(f"new-{suffix}", dict(rule.match_labels))
                ),
                "unlabelled namespace created": probe.create_reaches_kyverno(namespace(f"plain-{suffix}")),
                "namespace with one label wrong created": probe.create_reaches_kyverno(
                    namespace(f"almost-{suffix}", {**rule.match_labels, next(iter(rule.match_labels)): "other"})
                ),
                "namespace losing its labels": probe.reaches_kyverno(
                    "label", "namespace", ns, *(f"{key}-" for key in rule.match_labels)
                ),
                "generated quota deleted": probe.reaches_kyverno(
                    "delete", "resourcequota", generated["metadata"]["name"], "-n", ns
                ),
                "Pulumi's quota deleted": probe.reaches_kyverno(
                    "delete", "resourcequota", pulumis["metadata"]["name"], "-n", ns
                ),
            }
    finally:
        kubectl("delete", "namespace", losing["metadata"]["name"], "--wait=false")
    assert sent == {
        "labelled namespace created": True,
        "unlabelled namespace created": False,
        "namespace with one label wrong created": False,
        "namespace losing its labels": True,
        "generated quota deleted": True,
        "Pulumi's quota deleted": False,
    }
