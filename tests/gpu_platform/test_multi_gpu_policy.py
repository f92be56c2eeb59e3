"""Honest multi-GPU requests (issue 37 item 4): a pod asking for more than one GPU is steered to domains whose cards
are whole, and refused when no whole domain has that many; run through the strict Kyverno model (the e2e tier holds
the model to the real Kyverno CLI, and the CEL twins to these ClusterPolicies)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from components.gpu_platform.multi_gpu import NODE_LABEL, STEERING_RULE_NAME, WholeCards
from components.gpu_platform.steering_policy import build_gpu_steering_policy, build_multi_gpu_policy
from config.kyverno import KyvernoConfig
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.gpu_platform.kyverno_admission import admit, container, denials, pod, pod_request, refusal, run_rules

OPERATOR_NAMESPACE = "gpu-operator"
SMOKE = "gpu-smoke-test"
WHOLE = WholeCards(profiles=("whole", "whole-h100"), domains=(("dc3", 1), ("dc4", 2)), smoke_namespace=SMOKE)
NONE_WHOLE = WholeCards(profiles=(), domains=(), smoke_namespace=SMOKE)
GPU_EXPRESSION = {"key": "nodepool", "operator": "In", "values": ["gpu"]}
WHOLE_EXPRESSION = {"key": NODE_LABEL, "operator": "In", "values": ["whole", "whole-h100"]}


def steering(whole: WholeCards = WHOLE) -> dict[str, Any]:
    return build_gpu_steering_policy(KyvernoConfig(), operator_namespace=OPERATOR_NAMESPACE, whole=whole)


def refusing(whole: WholeCards = WHOLE) -> dict[str, Any]:
    return build_multi_gpu_policy(KyvernoConfig(), operator_namespace=OPERATOR_NAMESPACE, whole=whole)


def terms(admitted: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = admitted["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return found


def sidecar(name: str, gpu: Any) -> dict[str, Any]:
    return container(name, gpu=gpu, restartPolicy="Always")


def labelled(body: dict[str, Any], namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["metadata"].update(namespace=namespace, labels=labels)
    return body


# --------------------------------------------------------------------------------------------------------
# Which pods ask for several GPUs: what the scheduler counts
# --------------------------------------------------------------------------------------------------------

SEVERAL = {
    "two in one container": pod(container(gpu="2")),
    "two as a JSON number": pod(container(gpu=2)),
    "one in each of two containers": pod(container("a", gpu="1"), container("b", gpu="1")),
    "two in a plain init container": pod(container(gpu="1"), init=[container("warmup", gpu="2")]),
    "a sidecar's one beside the app's one": pod(container(gpu="1"), init=[sidecar("proxy", "1")]),
}
ONE_OR_NONE = {
    "one": pod(container(gpu="1")),
    "one in an init container, then one in the app": pod(container(gpu="1"), init=[container("warmup", gpu="1")]),
    "two init containers of one each, one after the other": pod(
        container(), init=[container("a", gpu="1"), container("b", gpu="1")]
    ),
    "zero": pod(container(gpu="0")),
    "none": pod(container()),
}


def test_a_pod_asking_for_several_gpus_requires_a_whole_domain_beside_the_gpu_node() -> None:
    for name, body in SEVERAL.items():
        assert terms(admit(steering(), body)) == [{"matchExpressions": [GPU_EXPRESSION, WHOLE_EXPRESSION]}], name


def test_a_pod_holding_at_most_one_gpu_at_a_time_is_steered_as_before() -> None:
    for name, body in ONE_OR_NONE.items():
        assert admit(steering(), body) == admit(steering(NONE_WHOLE), body), name


def test_each_non_empty_term_of_the_pods_own_gains_the_whole_domain_and_an_empty_term_stays_empty() -> None:
    own = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {},
    ]
    body = pod(
        container(gpu="2"),
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own}}},
    )
    assert terms(admit(steering(), body)) == [
        {"matchExpressions": [own[0]["matchExpressions"][0], GPU_EXPRESSION, WHOLE_EXPRESSION]},
        {**own[1], "matchExpressions": [GPU_EXPRESSION, WHOLE_EXPRESSION]},
        {},
    ]


def test_without_a_whole_domain_the_steering_policy_has_no_multi_gpu_rule() -> None:
    # An `In` with no values is invalid: with no whole domain the refusal alone answers such pods.
    assert STEERING_RULE_NAME not in [r["name"] for r in steering(NONE_WHOLE)["spec"]["rules"]]
    assert STEERING_RULE_NAME in [r["name"] for r in steering()["spec"]["rules"]]


# --------------------------------------------------------------------------------------------------------
# Refused at admission when no whole domain has that many cards
# --------------------------------------------------------------------------------------------------------


def test_a_pod_asking_for_more_gpus_than_any_whole_domain_has_is_refused_naming_the_count_and_the_domains() -> None:
    message = refusal(refusing(), pod(container("a", gpu="2"), container("b", gpu="1")))
    assert message is not None
    assert message.startswith("asks for 3 nvidia.com/gpu: a pod that asks for more than one nvidia.com/gpu")
    assert "the whole domains are dc3 (1 card), dc4 (2 cards); ask for at most 2" in message


def test_a_pod_asking_for_as_many_gpus_as_the_largest_whole_domain_has_is_admitted() -> None:
    assert refusal(refusing(), pod(container(gpu="2"))) is None
    for name, body in ONE_OR_NONE.items():
        assert refusal(refusing(), body) is None, name


def test_without_a_whole_domain_every_multi_gpu_pod_is_refused_and_one_gpu_is_fine() -> None:
    message = refusal(refusing(NONE_WHOLE), SEVERAL["one in each of two containers"])
    assert message is not None and "asks for 2 nvidia.com/gpu" in message
    assert "no domain of this pool has a whole sharing profile (replicas: 1); ask for at most 1" in message
    assert refusal(refusing(NONE_WHOLE), ONE_OR_NONE["one"]) is None


def test_the_excluded_namespaces_are_never_refused() -> None:
    body = pod(container(gpu="8"))
    assert refusal(refusing(), labelled(body, OPERATOR_NAMESPACE, {}), namespace=OPERATOR_NAMESPACE) is None
    assert refusal(refusing(), labelled(body, "kube-system", {}), namespace="kube-system") is None


# --------------------------------------------------------------------------------------------------------
# The program's smoke Jobs are exempt: their namespace and their label, both
# --------------------------------------------------------------------------------------------------------


def test_a_smoke_job_pod_asking_for_all_its_domains_cards_is_neither_steered_nor_refused() -> None:
    smoke = labelled(pod(container(gpu="4")), SMOKE, {"app.kubernetes.io/name": "cuda-smoke-test"})
    assert refusal(refusing(), smoke, namespace=SMOKE) is None
    admitted = run_rules(steering(), pod_request(smoke, namespace=SMOKE))
    assert terms(admitted) == [{"matchExpressions": [GPU_EXPRESSION]}]


def test_the_smoke_label_elsewhere_or_the_smoke_namespace_without_it_exempts_nothing() -> None:
    for namespace, labels in (("team-a", {"app.kubernetes.io/name": "cuda-smoke-test"}), (SMOKE, {"app": "x"})):
        body = labelled(pod(container(gpu="4")), namespace, labels)
        assert refusal(refusing(), body, namespace=namespace) is not None, namespace
        admitted = run_rules(steering(), pod_request(body, namespace=namespace))
        assert terms(admitted) == [{"matchExpressions": [GPU_EXPRESSION, WHOLE_EXPRESSION]}], namespace


# --------------------------------------------------------------------------------------------------------
# Properties over many pods
# --------------------------------------------------------------------------------------------------------

# Every pod of up to two app and two init containers (plain or sidecar), each with no, one or two GPUs, in every
# affinity shape the steering tells apart: small enough to walk whole, which a sample would not guarantee.
_GPUS = [None, "1", 2]
_AFFINITIES: list[dict[str, Any] | None] = [
    None,
    {},
    {"nodeAffinity": {}},
    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
    {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
                    {},
                ]
            }
        }
    },
]


def _count(value: Any) -> int:
    return 0 if value is None else int(value)


def every_pod() -> list[tuple[dict[str, Any], int]]:
    """Each pod with the GPUs it holds while running, counted here independently of the policy's expression."""
    cases = []
    apps_choices = [list(c) for n in (1, 2) for c in itertools.product(_GPUS, repeat=n)]
    init_choices = [
        list(c) for n in (0, 1, 2) for c in itertools.product(itertools.product(_GPUS, (False, True)), repeat=n)
    ]
    for index, (apps, inits) in enumerate(itertools.product(apps_choices, init_choices)):
        affinity = _AFFINITIES[index % len(_AFFINITIES)]
        containers = [container(f"c{i}", gpu=g) for i, g in enumerate(apps)]
        init = [sidecar(f"i{i}", g) if always else container(f"i{i}", gpu=g) for i, (g, always) in enumerate(inits)]
        spec: dict[str, Any] = {} if affinity is None else {"affinity": copy.deepcopy(affinity)}
        running = sum(_count(g) for g in apps) + sum(_count(g) for g, always in inits if always)
        held = max([running, *(_count(g) for g, always in inits if not always)])
        cases.append((pod(*containers, init=init or None, **spec), held))
    return cases


def test_the_whole_domain_rule_is_in_every_non_empty_term_exactly_when_a_pod_holds_several_gpus() -> None:
    # Kyverno's side only (the API server's matchConditions have their own tests): GPU-less pods reach no rule.
    policy, refuse = steering(), refusing()
    helds = set()
    for body, held in every_pod():
        helds.add(held)
        if held == 0:
            continue
        admitted = run_rules(policy, pod_request(body))
        found = [t for t in terms(admitted) if t]
        assert all((WHOLE_EXPRESSION in t.get("matchExpressions", [])) == (held > 1) for t in found), body
        # Kyverno re-invokes the webhook: a second pass adds nothing.
        assert run_rules(policy, pod_request(admitted)) == admitted, body
        assert bool(denials(refuse, pod_request(body))) == (held > WHOLE.most_cards), body
    assert helds == set(range(9))  # the walk reaches every count up to 2+2+2+2, so no case went untested


def test_prods_whole_domains_come_from_its_sharing_profiles() -> None:
    raw = {k.removeprefix("gpu-pool:"): v for k, v in read_stack_file("prod").items()}
    whole = WholeCards.of(StackConfig.model_validate(raw))
    assert (whole.profiles, whole.domains, whole.limit) == (("whole",), (("dc3", 1),), 1)
