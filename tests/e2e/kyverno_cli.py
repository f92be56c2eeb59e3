"""The Kyverno CLI built from e2e/kyverno (`make e2e-tools`): the real policy engine, run on files.

`kyverno apply` runs the same engine as the admission controller (pkg/engine): it matches each rule, resolves
variables with Kyverno's own JMESPath, applies the patches rule after rule, evaluates validate conditions, and runs
generate rules against a fake client seeded with the trigger. It does not talk to a cluster unless told to
(`--cluster`, never used here), so it needs no API server.

One thing it cannot take: a ClusterPolicy with `spec.webhookConfiguration.matchConditions`. Its policy check asks
the (absent) cluster whether it is Kubernetes 1.27 or newer and dereferences a nil client: every `apply` and `test`
of such a policy panics (kyverno/kyverno#15833, open; v1.18.2, v1.19.0 and v1.19.1 alike). So `rules_only` hands the
CLI the policy file without them, byte for byte otherwise; the API server, which evaluates matchConditions in a
real cluster, evaluates them in tests/e2e/match_conditions.py.

Each run gets a fresh folder for its inputs, its outputs and the CLI's HOME, so nothing lands outside pytest's temp
dir. `--policy-report` gives every rule's result per resource; `--output DIR` keeps each resource as the mutate
policies left it (`<name>-mutated.yaml`) and what the generate rules created (`<policy>-generated.yaml`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kube import load_documents
from tests.environ import process_environment

TIMEOUT_SECONDS = 120
# What `--policy-report` says a rule did to a resource.
PASS, FAIL, SKIP, WARN, ERROR = "pass", "fail", "skip", "warn", "error"


class KyvernoError(AssertionError):
    """The CLI failed, or a rule ended in `error`; the message is everything the CLI printed, verbatim."""


@dataclass(frozen=True)
class RuleResult:
    policy: str
    rule: str
    result: str
    message: str


@dataclass(frozen=True)
class Applied:
    """What `kyverno apply` made of a set of resources."""

    # (kind, namespace, name) -> every rule result the policy report lists for that resource.
    results: Mapping[tuple[str, str, str], tuple[RuleResult, ...]]
    out: Path
    returncode: int
    output: str

    def rules(self, kind: str, name: str, namespace: str = "") -> dict[str, str]:
        """rule name -> result for one resource; empty when no rule ran (e.g. a matchCondition was false)."""
        return {r.rule: r.result for r in self.results.get((kind, namespace, name), ())}

    def messages(self, kind: str, name: str, namespace: str = "") -> dict[str, str]:
        return {r.rule: r.message for r in self.results.get((kind, namespace, name), ())}

    def mutated(self, name: str) -> dict[str, Any]:
        """The resource `name` as the mutate policies left it (the CLI writes it even when nothing changed)."""
        documents = load_documents((self.out / f"{name}-mutated.yaml").read_text())
        assert len(documents) == 1, f"{name}: {len(documents)} mutated documents, expected one per mutate policy"
        return documents[0]

    def generated(self, policy: str) -> list[dict[str, Any]]:
        """Every object the policy's generate rules created, in the order the CLI wrote them."""
        path = self.out / f"{policy}-generated.yaml"
        return load_documents(path.read_text()) if path.is_file() else []


def _reports(stdout: str) -> list[dict[str, Any]]:
    """The JSON reports `--policy-report --output-format json` prints (none when no rule ran). The CLI prints its
    "Mutation has been applied successfully." without a newline, so a report may start mid-line."""
    decoder = json.JSONDecoder()
    reports = []
    start = stdout.find('{"kind":')
    while start != -1:
        report, end = decoder.raw_decode(stdout, start)
        reports.append(report)
        start = stdout.find('{"kind":', end)
    return reports


def rules_only(policy: Path, work: Path) -> Path:
    """The policy file without `spec.webhookConfiguration.matchConditions`, which the CLI cannot load (#15833)."""
    (document,) = load_documents(policy.read_text())
    document["spec"]["webhookConfiguration"].pop("matchConditions")
    work.mkdir(parents=True, exist_ok=True)
    path = work / policy.name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _results(reports: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[RuleResult, ...]]:
    found: dict[tuple[str, str, str], list[RuleResult]] = {}
    for report in reports:
        for entry in report.get("results") or []:
            result = RuleResult(entry["policy"], entry.get("rule", ""), entry["result"], entry.get("message", ""))
            for subject in entry.get("resources") or []:
                key = (subject["kind"], subject.get("namespace", ""), subject["name"])
                found.setdefault(key, []).append(result)
    return {key: tuple(value) for key, value in found.items()}


@dataclass(frozen=True)
class Kyverno:
    binary: Path

    def run(self, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """The CLI with its HOME (and every cache or config it might look for) inside `work`, and no kubeconfig."""
        home = work / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            **process_environment(),
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "KUBECONFIG": str(work / "no-kubeconfig"),
            "NO_COLOR": "1",
        }
        return subprocess.run(
            [str(self.binary.absolute()), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )

    def version(self, work: Path) -> str:
        """What `kyverno version` says its version is."""
        done = self.run(work, "version")
        if done.returncode != 0:
            raise KyvernoError(f"kyverno version failed:\n{done.stdout}{done.stderr}")
        for line in done.stdout.splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
        raise KyvernoError(f"kyverno version printed no version:\n{done.stdout}")

    def apply(
        self,
        work: Path,
        policies: Sequence[Path],
        resources: Sequence[Mapping[str, Any]],
        *,
        operation: str | None = None,
    ) -> Applied:
        """`kyverno apply` of `policies` to `resources` (written to `work`), as a CREATE unless `operation` says.

        Raises KyvernoError when the CLI fails for another reason than a validate rule failing, or when any rule
        ends in `error`: an expression the engine cannot evaluate is a finding, never a silent skip.
        """
        names = [resource["metadata"]["name"] for resource in resources]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        assert not duplicates, f"the CLI names its outputs after the resource: {duplicates} used twice"
        work.mkdir(parents=True, exist_ok=False)
        resource_file = work / "resources.yaml"
        resource_file.write_text(yaml.safe_dump_all([dict(r) for r in resources], sort_keys=False))
        out = work / "out"
        args = [*(str(p) for p in policies), "--resource", str(resource_file), "--output", str(out)]
        args += ["--policy-report", "--output-format", "json", "--remove-color"]
        if operation is not None:
            values = work / "values.yaml"
            document = {
                "apiVersion": "cli.kyverno.io/v1alpha1",
                "kind": "Values",
                "globalValues": {"request.operation": operation},
            }
            values.write_text(yaml.safe_dump(document))
            args += ["--values-file", str(values)]
        done = self.run(work, "apply", *args)
        printed = f"$ kyverno apply {' '.join(args)}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
        try:
            results = _results(_reports(done.stdout))
        except (json.JSONDecodeError, KeyError) as error:
            raise KyvernoError(f"unreadable policy report ({error}):\n{printed}") from error
        all_results = [r for rs in results.values() for r in rs]
        errors = [r for r in all_results if r.result == ERROR]
        if errors:
            raise KyvernoError(f"{len(errors)} rule(s) ended in error:\n{printed}")
        # Exit 1 means "policy violations" (a validate rule failed); anything else non-zero is the CLI failing.
        failed = any(r.result == FAIL for r in all_results)
        if done.returncode not in (0, 1) or (done.returncode == 1) != failed:
            raise KyvernoError(f"kyverno apply exited {done.returncode}:\n{printed}")
        return Applied(results, out, done.returncode, printed)
