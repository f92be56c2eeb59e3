"""The critical path of a plan: failure domains are created in parallel, so adding domains never lengthens it."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.stack_generator import DOMAINS_KEY, QUOTAS_KEY, generate_stack_config
from components.stack_check import validate_stack
from offline.critical_path import PlanGraphError, critical_path, critical_path_length, critical_path_shape
from offline.recording import Recording, RecordingMonitor
from offline.render import plan
from offline.runner import PROJECT, read_stack_file

SERVER = "cloud:index:Server"
DISK = "cloud:index:Disk"
GROUP = "demo:index:Group"  # the project's own package: a component
COMMAND = "cloud:index:Command"


def urn(name: str, type_: str = SERVER) -> str:
    return f"urn:pulumi:test::demo::{type_}::{name}"


def resource(
    name: str, type_: str = SERVER, *, parent: str = "", depends_on: tuple[str, ...] = (), inputs: Any = None
) -> dict[str, Any]:
    """A plan.json entry, as offline/render.py writes it (no `custom` flag)."""
    return {
        "urn": urn(name, type_),
        "type": type_,
        "name": name,
        "parent": parent or "urn:pulumi:test::demo::pulumi:pulumi:Stack::demo-test",
        "dependsOn": list(depends_on),
        "protect": False,
        "inputs": {"size": 1} if inputs is None and type_ != GROUP else (inputs or {}),
    }


def plan_of(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"project": "demo", "stack": "test", "resources": list(resources), "outputs": {}}


def test_a_chain_of_dependencies_is_the_critical_path_in_creation_order() -> None:
    p = plan_of(
        resource("c", depends_on=(urn("b"),)),
        resource("a"),
        resource("b", depends_on=(urn("a"),)),
    )
    assert critical_path(p) == ["a", "b", "c"]
    assert critical_path_length(p) == 3


def test_in_a_diamond_the_longer_branch_is_the_critical_path() -> None:
    p = plan_of(
        resource("top"),
        resource("short", depends_on=(urn("top"),)),
        resource("long-1", depends_on=(urn("top"),)),
        resource("long-2", depends_on=(urn("long-1"),)),
        resource("bottom", depends_on=(urn("short"), urn("long-2"))),
    )
    assert critical_path(p) == ["top", "long-1", "long-2", "bottom"]


def test_depending_on_a_component_waits_for_its_children_but_the_component_is_not_a_step() -> None:
    group = urn("group", GROUP)
    p = plan_of(
        resource("image", DISK),
        resource("group", GROUP),
        resource("vm", parent=group, depends_on=(urn("image", DISK),)),
        resource("labels", depends_on=(group,)),
    )
    assert critical_path(p) == ["image", "vm", "labels"]
    assert GROUP not in critical_path_shape(p)


def test_depending_on_a_component_reaches_nested_components_but_not_children_of_custom_resources() -> None:
    outer, inner = urn("outer", GROUP), urn("inner", GROUP)
    p = plan_of(
        resource("outer", GROUP),
        resource("inner", GROUP, parent=outer),
        resource("disk", DISK, parent=inner),
        resource("a"),
        resource("b", depends_on=(urn("a"),)),
        # A child of a custom resource: the SDK does not expand a component dependency into it.
        resource("snapshot", parent=urn("disk", DISK), depends_on=(urn("b"),)),
        resource("x", depends_on=(outer,)),
    )
    # Had x waited for the snapshot, the path would be a, b, snapshot, x.
    assert critical_path(p) == ["a", "b", "snapshot"]


def test_a_child_of_a_custom_resource_waits_for_its_parent() -> None:
    p = plan_of(resource("vm"), resource("agent", DISK, parent=urn("vm")))
    assert critical_path(p) == ["vm", "agent"]


def test_children_of_one_component_do_not_wait_for_each_other() -> None:
    group = urn("group", GROUP)
    p = plan_of(resource("group", GROUP), resource("one", parent=group), resource("two", parent=group))
    assert critical_path_length(p) == 1


def test_children_inherit_what_their_component_depends_on() -> None:
    group = urn("group", GROUP)
    p = plan_of(
        resource("network"),
        resource("group", GROUP, depends_on=(urn("network"),)),
        resource("vm", parent=group),
    )
    assert critical_path(p) == ["network", "vm"]


def test_providers_are_not_steps_but_what_they_wait_for_still_orders_their_users() -> None:
    provider_type = "pulumi:providers:kubernetes"
    p = plan_of(
        resource("kubeconfig"),
        resource("k8s", provider_type, depends_on=(urn("kubeconfig"),)),
        resource("namespace", "kubernetes:core/v1:Namespace", depends_on=(urn("k8s", provider_type),)),
    )
    assert critical_path(p) == ["kubeconfig", "namespace"]


def test_an_explicit_custom_flag_overrides_the_guess() -> None:
    p = plan_of(resource("group", GROUP, inputs={"size": 1}), resource("vm", depends_on=(urn("group", GROUP),)))
    p["resources"][0]["custom"] = True
    assert critical_path(p) == ["group", "vm"]


def test_a_dependency_cycle_is_refused() -> None:
    p = plan_of(resource("a", depends_on=(urn("b"),)), resource("b", depends_on=(urn("a"),)))
    with pytest.raises(PlanGraphError, match="cycle"):
        critical_path(p)


def test_a_plan_without_custom_resources_has_an_empty_critical_path() -> None:
    p = plan_of(resource("group", GROUP))
    assert critical_path(p) == []
    assert critical_path_length(p) == 0


def domains_plan(count: int, *, chained: bool) -> dict[str, Any]:
    """`count` domains of mapping -> vm -> ready; `chained` makes each domain wait for the previous one."""
    resources = []
    for index in range(1, count + 1):
        name = f"dc{index}"
        group = urn(name, GROUP)
        previous = (urn(f"dc{index - 1}-ready", COMMAND),) if chained and index > 1 else ()
        resources += [
            resource(name, GROUP),
            resource(f"{name}-mapping", DISK, parent=group, depends_on=previous),
            resource(f"{name}-vm", parent=group, depends_on=(urn(f"{name}-mapping", DISK),)),
            resource(f"{name}-ready", COMMAND, parent=group, depends_on=(urn(f"{name}-vm"),)),
        ]
    return plan_of(*resources)


def test_independent_domains_give_the_same_shape_at_any_count() -> None:
    assert critical_path_shape(domains_plan(57, chained=False)) == critical_path_shape(domains_plan(3, chained=False))
    assert critical_path_shape(domains_plan(3, chained=False)) == [DISK, SERVER, COMMAND]


def test_a_cross_domain_dependency_makes_the_critical_path_grow_with_the_domains() -> None:
    assert critical_path_length(domains_plan(30, chained=True)) == 30 * critical_path_length(
        domains_plan(1, chained=False)
    )


def test_the_generator_with_prods_domain_count_reproduces_prod() -> None:
    prod = read_stack_file("prod")
    assert generate_stack_config(len(prod[DOMAINS_KEY])) == prod


def test_a_generated_100_domain_stack_is_valid_with_distinct_hosts_vms_names_and_addresses() -> None:
    config = generate_stack_config(100)
    stack = validate_stack({key.partition(":")[2]: value for key, value in config.items()})
    domains = stack.failure_domains
    assert len(domains) == 100
    for attribute in ("name", "proxmox_node", "vm_id", "hostname"):
        assert len({getattr(domain, attribute) for domain in domains}) == 100, attribute
    networks = {ipaddress.IPv4Interface(d.network.ipv4).network for d in domains if d.network.ipv4 != "dhcp"}
    assert len(networks) in (0, 100)
    assert len(stack.sharing_profiles) > len(read_stack_file("prod")["gpu-pool:sharingProfiles"])
    if QUOTAS_KEY in config:
        assert len(config[QUOTAS_KEY]["namespaces"]) > len(read_stack_file("prod")[QUOTAS_KEY]["namespaces"])


def test_a_generated_30_domain_stack_has_the_critical_path_of_the_3_domain_one(
    monitor: RecordingMonitor, run_stack_program: Callable[..., Recording]
) -> None:
    small = plan(run_stack_program(generate_stack_config(3)), PROJECT, "test")
    # The fixture returns whatever the monitor records into; a fresh recording keeps the two stacks apart.
    monitor.recording = Recording()
    large = plan(run_stack_program(generate_stack_config(30)), PROJECT, "test")

    assert len(large["resources"]) > len(small["resources"])
    assert critical_path_length(small) >= 2
    assert critical_path_length(large) == critical_path_length(small)
    assert critical_path_shape(large) == critical_path_shape(small)


def test_a_first_install_waits_for_nothing_across_domains_and_a_wave_waits_once_per_later_domain() -> None:
    from benchmarks.wave_case import rke2_bump_plan
    from offline.critical_path import cross_component_waits
    from offline.runner import run_stack

    domain = "gpu-pool:proxmox:GpuFailureDomain"
    first_install = plan(run_stack("prod"), PROJECT, "prod")
    assert cross_component_waits(first_install, domain) == []
    assert cross_component_waits(rke2_bump_plan(), domain) == [
        ("dc2-rke2-login", "dc1-rollout"),
        ("dc2-wave-drain", "dc1-rollout"),
        ("dc3-rke2-login", "dc2-rollout"),
        ("dc3-wave-drain", "dc2-rollout"),
    ]
