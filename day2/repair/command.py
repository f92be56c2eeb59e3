"""`gpu-pool repair NODE --stack NAME`: a faulted card brought back through Proxmox, one failure domain at a time.

It decides (doctor on the cluster or a dump, node-check over SSH or from a saved report: day2/repair/decide.py), checks
the guard rails, and prints the repair's turn: the steps `make diff` names, planned by the same function that
plans a wave's turns (components/gpu_failure_domain/plan.py, a turn of kind `repair`). With `--yes` it runs them
in order as pulumi-command would (day2/repair/run.py) and stops at the first failure with the node cordoned.

Before anything stops it reads the host (day2/repair/decide.py host_check): the VM's lock, HA state and status and the
card in the host's own PCI list, from the Proxmox API or, for a dry run, saved answers (`--proxmox-from DIR`).

Exit codes: 0 it would repair (`--yes`: it did); 1 no repair is needed, a power cycle cannot fix what is broken
(the reason says what to do instead: a card the host lost, another card than the stack's), or a step of the
repair failed after Proxmox accepted the stop; 2 nothing was changed: a refusal (a guard rail, a VM lock, an
HA-managed VM), Proxmox unreachable or refusing the token, or an input error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from components.gpu_failure_domain.node_metadata import ssh_host
from components.gpu_failure_domain.plan import Command, DomainPlan, nodes_by_domain, plan_domain, repair_turn
from config.failure_domain import FailureDomainConfig
from config.secret_sources import FILE_ENV
from config.secrets import proxmox_credential
from config.stack import StackConfig
from day2.arguments import timestamp
from day2.bundle import node_check_command
from day2.command import ExitStatus, Io
from day2.doctor.node_report import NodeCheck, parse_node_check, read_node_checks
from day2.doctor.walk import diagnose
from day2.errors import Day2Error
from day2.node_stack import as_flags, expected_of
from day2.pool import facts_of, read_stack
from day2.repair.breaker import reset_breaker
from day2.repair.decide import (
    TIME_FORMAT,
    Decision,
    HostCheck,
    decide,
    host_check,
    power_cycles_within_a_day,
    refusals,
    vm_problem,
)
from day2.repair.run import Inputs, execute, key_file, ssh_argv
from day2.sources import DOCTOR_NEEDS, load_dump, load_live
from node.proxmox import Proxmox, ProxmoxFailed

NAME = "repair"
HELP = "power-cycle a faulted card's VM through Proxmox, one failure domain at a time (prints the plan; --yes runs it)"


def add_arguments(repair: argparse.ArgumentParser) -> None:
    repair.add_argument(
        "node", metavar="NODE", nargs="?", help="the GPU node (a failure domain's hostname); none with --reset-breaker"
    )
    repair.add_argument("--stack", metavar="NAME", required=True, help="read Pulumi.NAME.yaml")
    repair.add_argument("--stack-dir", metavar="DIR", default=".", help="folder holding Pulumi.NAME.yaml")
    source = repair.add_argument_group("what the decision reads (default: the stack's cluster, node-check over SSH)")
    source.add_argument("--from", dest="dump", metavar="FILE", help="a dump instead of the cluster (no --yes)")
    source.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the cluster (default: the stack's)")
    source.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the stack's)")
    source.add_argument(
        "--node-check", metavar="FILE", help="`gpu-pool node-check -o json` from the node, instead of over SSH"
    )
    source.add_argument(
        "--proxmox-from",
        metavar="DIR",
        help="saved Proxmox answers instead of the API (a dry run): DIR/cluster-resources.json (`pvesh get "
        "/cluster/resources --type vm --output-format json`) and DIR/<proxmoxNode>-pci.json (`pvesh get "
        "/nodes/<node>/hardware/pci --output-format json`)",
    )
    repair.add_argument("--yes", action="store_true", help="run the repair (without it: print the plan only)")
    repair.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    repair.add_argument("--now", type=timestamp, metavar="TIME", help="judge the daily budget at this RFC 3339 time")
    repair.add_argument(
        "--reset-breaker",
        action="store_true",
        help="close the unattended repair's breaker in the stack's cluster (recorded with who and when), after "
        "looking at the hardware of the repairs that did not fix",
    )


@dataclass(frozen=True)
class Checked:
    """What the guard rails found, for the plan's footer."""

    others_out: int
    power_cycles: int
    vm: str


def _domain(stack: StackConfig, node: str, name: str) -> FailureDomainConfig:
    domain = next((d for d in stack.failure_domains if d.hostname == node), None)
    if domain is None:
        nodes = ", ".join(d.hostname for d in stack.failure_domains)
        raise Day2Error(f"repair {node}: not a GPU node of stack {name}; its GPU nodes: {nodes}")
    return domain


def _with_cluster(stack: StackConfig, kubeconfig: str | None, context: str | None) -> StackConfig:
    """The stack with the cluster the user named: the repair's kubectl steps talk to the cluster doctor read."""
    if not kubeconfig and not context:
        return stack
    cluster = stack.kubernetes.model_copy(
        update={"kubeconfig": kubeconfig or stack.kubernetes.kubeconfig, "context": context or stack.kubernetes.context}
    )
    return stack.model_copy(update={"kubernetes": cluster})


def _secrets(folder: Path) -> dict[str, str]:
    from config.secret_sources import SecretSourceError, current

    try:
        return current(folder)
    except SecretSourceError as error:
        raise Day2Error(str(error)) from None


def proxmox_environment(stack: StackConfig, secrets: dict[str, str]) -> dict[str, str]:
    """The power-cycle step's credential, as the stack's `up` gives it (components/shared/providers.py)."""
    credential = proxmox_credential(stack.proxmox.auth)
    value = secrets.get(credential.key)
    return {credential.provider_env: value} if value and credential.provider_env else {}


def _secret_hint(stack: StackConfig) -> str:
    credential = proxmox_credential(stack.proxmox.auth)
    return f"{credential.source_env}, or a {FILE_ENV} line {credential.key}=..., as the offline preview reads it"


def _refused(where: str, what: str, failure: ProxmoxFailed) -> Day2Error:
    if failure.status is None:
        return Day2Error(str(failure))
    privilege = {401: "the token is not valid", 403: "the token lacks the privilege"}.get(failure.status, "")
    # GET /nodes/<node>/hardware/pci checks Sys.Audit on `/`, not on /nodes/<node> (pve-manager PVE/API2/Hardware/
    # PCI.pm pci_scan: FIELD-REVIEW-6 W-4); propagate off is enough.
    need = f" ({privilege}: VM.Audit on /vms, Sys.Audit on /)" if privilege else ""
    return Day2Error(f"{where} refused to {what}: {failure}{need}")


def proxmox_answers(
    stack: StackConfig, domain: FailureDomainConfig | None, credential: dict[str, str]
) -> tuple[list[dict[str, Any]], Any]:
    """The VM list and, for `domain`, its host's PCI devices, read before anything stops; an error changes
    nothing (exit 2)."""
    api = Proxmox(stack.proxmox.endpoint, stack.proxmox.insecure, stack.trusted_ca)
    where = f"the Proxmox API at {stack.proxmox.endpoint}"
    try:
        api.login(credential.get("PROXMOX_API_TOKEN"), credential.get("PROXMOX_ROOT_PASSWORD"))
    except ProxmoxFailed as failure:
        raise _refused(where, "log in", failure) from None
    try:
        answer = api.call("GET", "/cluster/resources?type=vm")
    except ProxmoxFailed as failure:
        raise _refused(where, "list the VMs", failure) from None
    guests = [dict(r) for r in answer or [] if isinstance(r, dict)]
    if domain is None:
        return guests, None
    try:
        pci = api.hardware_pci(domain.proxmox_node)
    except ProxmoxFailed as failure:
        raise _refused(where, f"list {domain.proxmox_node}'s PCI devices", failure) from None
    return guests, pci


def saved_proxmox_answers(folder: str, domain: FailureDomainConfig) -> tuple[list[dict[str, Any]], Any]:
    """`--proxmox-from DIR`: the same two answers, saved with pvesh (as `discover --from` reads its one)."""
    answers: list[Any] = []
    for name, save in (
        ("cluster-resources.json", "pvesh get /cluster/resources --type vm --output-format json"),
        (
            f"{domain.proxmox_node}-pci.json",
            f"pvesh get /nodes/{domain.proxmox_node}/hardware/pci --output-format json",
        ),
    ):
        path = Path(folder) / name
        try:
            answers.append(json.loads(path.read_text(encoding="utf-8")))
        except OSError as error:
            raise Day2Error(
                f"--proxmox-from {folder}: cannot read {name}: {error.strerror}; save it with `{save}`"
            ) from None
        except ValueError:
            raise Day2Error(f"--proxmox-from {folder}: {name} is not JSON: save it with `{save}`") from None
    guests = answers[0]["data"] if isinstance(answers[0], dict) and "data" in answers[0] else answers[0]
    if not isinstance(guests, list):
        raise Day2Error(f"--proxmox-from {folder}: cluster-resources.json is not a list of guests")
    return [dict(g) for g in guests if isinstance(g, dict)], answers[1]


def node_check_flags(stack: StackConfig, domain: FailureDomainConfig) -> list[str]:
    return [*as_flags(expected_of(stack, domain)), "--node", domain.hostname]


def node_check_over_ssh(
    stack: StackConfig, domain: FailureDomainConfig, key_file: Path | None
) -> tuple[NodeCheck | None, str]:
    """node-check run on the node over SSH: its report, or why there is none."""
    if not domain.ssh_authorized_keys:
        return None, (
            f"gpu-pool:failureDomains[{domain.name}] has no sshAuthorizedKeys, so the VM trusts no key of the stack's"
        )
    target = f"{domain.username}@{ssh_host(domain)}"
    command = node_check_command(node_check_flags(stack, domain), strict=False)
    try:
        done = subprocess.run(
            [*ssh_argv(domain, key_file), command], capture_output=True, text=True, timeout=180, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"node-check over SSH to {target} did not run: {error}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return None, f"node-check over SSH to {target} failed: {last}"
    try:
        return parse_node_check(json.loads(done.stdout), f"(over SSH from {target})"), ""
    except (ValueError, Day2Error) as error:
        return None, f"node-check over SSH to {target} printed no report: {error}"


def _plan(inputs: Inputs, decision: Decision, node: Any, now: datetime.datetime, holder: str) -> DomainPlan:
    at = now.strftime(TIME_FORMAT)
    turn = repair_turn(inputs.domain, node, decision.reason, at)
    check = None
    if inputs.domain.ssh_authorized_keys:
        check = Command(
            node_check_command(node_check_flags(inputs.stack, inputs.domain), strict=True), interpreter=None
        )
    return plan_domain(inputs.domain, inputs.stack, turn, node_check=check, holder=holder)


def repair_holder() -> str:
    """Who holds the node during this repair (observed.TURN_HOLDER_ANNOTATION): `repair:<user>@<host>`."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"repair:{user}@{socket.gethostname()}"


def _document(node: str, domain: str, decision: Decision, plan: DomainPlan | None) -> dict[str, Any]:
    steps = plan.turn_steps() if plan is not None else []
    return {
        "node": node,
        "domain": domain,
        "repair": decision.repair,
        "reason": decision.reason,
        "steps": [{"name": step.name, "description": step.does} for step in steps],
    }


def print_table(out: TextIO, node: str, domain: str, decision: Decision, plan: DomainPlan | None) -> None:
    out.write(f"{node} (domain {domain}): {'repair' if decision.repair else 'no repair'}\n")
    out.write(f"  {'why' if decision.repair else 'reason'}: {decision.reason}\n")
    if plan is None:
        return
    if plan.turn.stopped:
        # Run again after a stop: what the node says about the earlier attempt (gpu-pool.dev/wave-stopped).
        out.write(f"  earlier: {plan.turn.stopped}\n")
    rows = [("step", "what it does")] + [(step.name, step.does) for step in plan.turn_steps()]
    width = max(len(name) for name, _ in rows)
    for index, (name, does) in enumerate(rows):
        out.write(f" {name:<{width}}   {does}\n")
        if index == 0:
            out.write("─" * (width + 4 + max(len(does) for _, does in rows)) + "\n")


def _footer(out: TextIO, inputs: Inputs, plan: DomainPlan, checked: Checked, args: argparse.Namespace) -> None:
    stack, domain = inputs.stack, inputs.domain
    if plan.turn.uncordons:
        ends = "uncordoned and serving once every check passed; its rollout record is left as it is"
    else:
        ends = "still cordoned: someone else cordoned it before the repair, so uncordoning it is theirs"
    out.write(f"  ends: {ends}\n")
    if not any(step.name == "node-check" for step in plan.steps):
        out.write(
            f"  node-check does not run again after the power cycle: gpu-pool:failureDomains[{domain.name}] has no "
            "sshAuthorizedKeys; the gate and the smoke test check the card\n"
        )
    others = "no other domain is out" if not checked.others_out else f"{checked.others_out} other domain(s) out"
    size = stack.rollout.max_unavailable
    out.write("  guard rails:\n")
    out.write(f"    one domain at a time: {others} (gpu-pool:rollout.maxUnavailable {size})\n")
    out.write(
        f"    daily budget: {checked.power_cycles} of {stack.repair.max_per_day} power cycles in the last 24 hours "
        "(gpu-pool:repair.maxPerDay)\n"
    )
    out.write(f"    the VM: {checked.vm}\n")
    if not args.yes:
        where = f" --stack-dir {args.stack_dir}" if args.stack_dir != "." else ""
        out.write(f"  run it: gpu-pool repair {domain.hostname} --stack {args.stack}{where} --yes\n")


def read_host(
    args: argparse.Namespace, stack: StackConfig, domain: FailureDomainConfig, credential: dict[str, str]
) -> tuple[HostCheck, str]:
    """What Proxmox says of the VM and its card (the API, or `--proxmox-from` answers), before anything stops; the
    VM check's line for the plan's footer. The VM identity's refusal rides with the host's refusals."""
    answers: tuple[list[dict[str, Any]], Any] | None = None
    if args.proxmox_from:
        answers = saved_proxmox_answers(args.proxmox_from, domain)
    elif credential:
        answers = proxmox_answers(stack, domain, credential)
    if answers is None:
        if args.yes:
            raise Day2Error(
                f"repair {domain.hostname}: the power cycle needs the stack's Proxmox credential: {_secret_hint(stack)}"
            )
        return HostCheck(), (
            f"VM {domain.vm_id} on {domain.proxmox_node}: not checked, no Proxmox credential ({_secret_hint(stack)})"
        )
    guests, pci = answers
    where = f"{args.proxmox_from}/{domain.proxmox_node}-pci.json" if args.proxmox_from else ""
    host = host_check(domain, guests, pci, stack.repair.allow_ha_managed, where)
    problem = vm_problem(domain, guests)
    if problem:
        host = HostCheck((problem, *host.refusals), host.failures, host.notes)
    read = f" (saved in {args.proxmox_from})" if args.proxmox_from else ""
    vm = "; ".join([f"VM {domain.vm_id} on {domain.proxmox_node} is {domain.hostname} in Proxmox{read}", *host.notes])
    return host, vm


def run(args: argparse.Namespace, io: Io) -> ExitStatus:
    out, err, now = io.out, io.err, args.now or io.clock()
    if args.reset_breaker:
        if args.node or args.yes or args.dump or args.node_check or args.proxmox_from:
            raise Day2Error("--reset-breaker takes --stack (and --stack-dir, --kubeconfig, --context) only: no NODE")
        stack = _with_cluster(read_stack(args.stack, Path(args.stack_dir)), args.kubeconfig, args.context)
        reset_breaker(stack, args.stack, out, now)
        return ExitStatus.SUCCESS
    if args.node is None:
        raise Day2Error("repair needs NODE (a GPU node of the stack), or --reset-breaker")
    if args.yes and (args.dump or args.proxmox_from):
        saved = [
            *(["--from (a dump is for a look at the plan)"] if args.dump else []),
            *(["--proxmox-from (it reads saved answers: a dry run)"] if args.proxmox_from else []),
        ]
        raise Day2Error(f"--yes repairs the live cluster: drop {' and '.join(saved)}")
    folder = Path(args.stack_dir)
    stack = _with_cluster(read_stack(args.stack, folder), args.kubeconfig, args.context)
    domain = _domain(stack, args.node, args.stack)
    facts = facts_of(stack, args.stack)
    secrets = _secrets(folder)
    if args.dump is not None:
        if args.kubeconfig or args.context:
            raise Day2Error("--from reads a dump; --kubeconfig and --context are for a live cluster")
        snapshot = load_dump(args.dump, DOCTOR_NEEDS, "repair")
    else:
        snapshot = load_live(stack.kubernetes.kubeconfig, stack.kubernetes.context)

    with key_file(secrets.get("sshPrivateKey")) as key:
        inputs = Inputs(stack, domain, secrets, key)
        report: NodeCheck | None
        if args.node_check:
            reports = read_node_checks([args.node_check])
            report = reports.get(domain.hostname)
            if report is None:
                raise Day2Error(f"--node-check {args.node_check}: no report of {domain.hostname} in it")
            why_not = ""
        elif args.dump is not None:
            report, why_not = None, "--from reads files only: give the node's report with --node-check FILE"
        else:
            report, why_not = node_check_over_ssh(stack, domain, key)
        decision = decide(diagnose(snapshot, facts, domain.hostname, report), why_not)
        if not decision.repair:
            if args.output == "json":
                out.write(json.dumps(_document(domain.hostname, domain.name, decision, None), indent=2) + "\n")
            else:
                print_table(out, domain.hostname, domain.name, decision, None)
            return ExitStatus.FINDING
        observed = nodes_by_domain(stack, {"items": list(snapshot.nodes)})
        problems = refusals(stack, domain, observed, now)
        credential = proxmox_environment(stack, secrets)
        host, vm = read_host(args, stack, domain, credential)
        problems += list(host.refusals)
        if problems:
            raise Day2Error(f"repair {domain.hostname} refused: {'; '.join(problems)}")
        if host.failures:
            # The host's side is broken: a power cycle of the VM is not the fix, whatever doctor found.
            decision = Decision(False, "; ".join(host.failures))
            if args.output == "json":
                out.write(json.dumps(_document(domain.hostname, domain.name, decision, None), indent=2) + "\n")
            else:
                print_table(out, domain.hostname, domain.name, decision, None)
            return ExitStatus.FINDING
        node = observed[domain.name]
        assert node is not None  # doctor's node floor would have been the first broken one
        out_now = [d for d in stack.failure_domains if (n := observed[d.name]) is None or n.out]
        checked = Checked(
            sum(1 for d in out_now if d.name != domain.name), len(power_cycles_within_a_day(node, now)), vm
        )
        holder = repair_holder()
        plan = _plan(inputs, decision, node, now, holder)
        if args.output == "json":
            out.write(json.dumps(_document(domain.hostname, domain.name, decision, plan), indent=2) + "\n")
        else:
            print_table(out, domain.hostname, domain.name, decision, plan)
            _footer(out, inputs, plan, checked, args)
        if not args.yes:
            return ExitStatus.SUCCESS
        # With -o json the plan is the answer on stdout; the run's progress goes to stderr.
        return ExitStatus(execute(plan, inputs, credential, args, err if args.output == "json" else out, holder))
