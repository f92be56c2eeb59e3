"""A first boot that finishes or says why: the VM's cloud-init runcmd as named steps, each run by one small runner
that records its result (FIELD-REVIEW-6 IB-1, issue 49).

Before, runcmd was one `set -e` script and cloud-init's package modules ran before it: a guest agent apt could not
install (a mirror that lacks the release, no route out) stopped the script before `rke2-agent`, and the only word
of why was in the VM's console. Now joining the cluster depends on the essential steps alone (the RKE2 installer,
its install, the agent); the package install, the kernel holds, the initramfs and the guest agent are optional:
their failure is recorded and the boot goes on. Downloads retry with backoff. Each step's result is a line in
`/var/lib/gpu-pool/first-boot/steps` and on the console; the last step writes them all on the Node as the
annotation `gpu-pool.dev/first-boot` (RKE2's kubectl with the kubelet's own credentials: a node may annotate
itself), where `gpu-pool doctor` reads them. A boot that stopped names the step, its URL and the error on the
console and in that folder.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from components.gpu_failure_domain.observed import FIRST_BOOT_ANNOTATION

# Where the runner lives on the VM (cloud-init write_files) and where it keeps each step's log and result.
STEP_RUNNER = "/usr/local/sbin/gpu-pool-first-boot-step"
RESULTS_DIR = "/var/lib/gpu-pool/first-boot"
# RKE2's own kubectl and the kubelet's credentials, on every agent once rke2-agent has started.
RKE2_KUBECTL = "/var/lib/rancher/rke2/bin/kubectl"
KUBELET_KUBECONFIG = "/var/lib/rancher/rke2/agent/kubelet.kubeconfig"

Kind = Literal["essential", "optional"]


@dataclass(frozen=True)
class FirstBootStep:
    """One step of the first boot: its name (in the results and doctor), whether joining depends on it, the shell
    command, whether it downloads (then retried with backoff) and what it downloads from."""

    name: str
    kind: Kind
    command: str
    download: bool = False
    url: str = ""

    def line(self) -> str:
        """The runcmd line that runs it through the runner."""
        kind = f"{self.kind}-download" if self.download else self.kind
        words = [STEP_RUNNER, kind, self.name, self.command, *([self.url] if self.url else [])]
        return " ".join(shlex.quote(word) for word in words)


def report_line(node_name: str) -> str:
    """The last runcmd line: every step's result written on the Node, once it has registered."""
    return " ".join(shlex.quote(word) for word in (STEP_RUNNER, "report", node_name))


def step_commands(runcmd: Iterable[Any]) -> dict[str, tuple[str, str]]:
    """name -> (kind, command) of each step a rendered runcmd runs through the runner (the rendered plan's rules
    read the steps from the rendered document, not from the table that made it)."""
    steps: dict[str, tuple[str, str]] = {}
    for line in runcmd:
        words = shlex.split(str(line)) if str(line).startswith(STEP_RUNNER) else []
        if len(words) >= 4 and words[1] != "report":
            steps[words[2]] = (words[1], words[3])
    return steps


# The runner: POSIX sh, as cloud-init runs runcmd (dash on Ubuntu). It never stops the boot for an optional step;
# an essential one that fails after its attempts exits non-zero, and runcmd's `set -e` stops there. The log of each
# step is kept whole in its file; the results file keeps its last line, which is where curl, apt and install.sh say
# what went wrong. GPU_POOL_RETRY_SECONDS is the first wait between attempts (doubled each time).
_RUNNER_TEMPLATE = r"""#!/bin/sh
# gpu-pool's first boot, one step at a time (written by gpu-pool; docs/air-gap.md, "A first boot that finishes or
# says why"). Usage: gpu-pool-first-boot-step KIND NAME COMMAND [URL] | report NODE
set -u
results=${GPU_POOL_FIRST_BOOT_DIR:-@RESULTS@}
mkdir -p "$results"
say() { echo "gpu-pool first boot: $*"; }
json_text() { tr -d '\000-\037' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | cut -c1-400; }

if [ "$1" = report ]; then
  node=$2
  summary="{\"steps\":[$(paste -sd, "$results/steps" 2>/dev/null)]}"
  printf '%s\n' "$summary" >"$results/summary.json"
  kubectl=${GPU_POOL_KUBECTL:-@KUBECTL@}
  delay=${GPU_POOL_RETRY_SECONDS:-5}
  # The Node appears once the agent has registered it: wait for it, then annotate it with the kubelet's own
  # credentials (a node may change its own annotations).
  for try in 1 2 3 4 5 6 7 8; do
    if "$kubectl" --kubeconfig @KUBECONFIG@ annotate --overwrite node "$node" \
        "@ANNOTATION@=$summary" >"$results/report.log" 2>&1; then
      say "results written on node $node (annotation @ANNOTATION@)"
      exit 0
    fi
    sleep "$delay"; delay=$((delay * 2))
  done
  say "could not write the results on node $node: $(tail -n 1 "$results/report.log"); they are in $results"
  exit 0
fi

kind=$1; name=$2; command=$3; url=${4:-}
case $kind in *-download) attempts=4 ;; *) attempts=1 ;; esac
delay=${GPU_POOL_RETRY_SECONDS:-5}
log="$results/$name.log"
try=1
while :; do
  say "$name${url:+ ($url)}"
  sh -c "$command" >"$log" 2>&1
  rc=$?
  cat "$log"
  if [ "$rc" -eq 0 ] || [ "$try" -ge "$attempts" ]; then break; fi
  say "$name failed (exit $rc), attempt $try of $attempts; again in ${delay}s"
  sleep "$delay"; delay=$((delay * 2)); try=$((try + 1))
done
# The line that says what went wrong: curl's, apt's, install.sh's, else the last one.
error=""
if [ "$rc" -ne 0 ]; then
  for pattern in '^curl: \(' '^E: ' '\[ERROR\]' '.'; do
    error=$(grep -E "$pattern" "$log" | head -n 1 | json_text)
    [ -z "$error" ] || break
  done
fi
case $kind in essential*) essential=true ;; *) essential=false ;; esac
line='{"step":"%s","essential":%s,"exit":%d,"attempts":%d,"url":"%s","error":"%s"}\n'
printf "$line" "$name" "$essential" "$rc" "$try" "$(printf '%s' "$url" | json_text)" "$error" >>"$results/steps"
if [ "$rc" -eq 0 ]; then exit 0; fi
if [ "$essential" = true ]; then
  say "STOPPED at $name${url:+ ($url)}: exit $rc: $error (the whole log: $log)"
  exit "$rc"
fi
say "$name failed (exit $rc), the boot goes on without it: $error (the whole log: $log)"
exit 0
"""
_FILLED = {"@RESULTS@": RESULTS_DIR, "@KUBECTL@": RKE2_KUBECTL, "@KUBECONFIG@": KUBELET_KUBECONFIG}
STEP_RUNNER_SCRIPT = _RUNNER_TEMPLATE
for _mark, _value in {**_FILLED, "@ANNOTATION@": FIRST_BOOT_ANNOTATION}.items():
    STEP_RUNNER_SCRIPT = STEP_RUNNER_SCRIPT.replace(_mark, _value)


def runner_file() -> dict[str, str]:
    return {"path": STEP_RUNNER, "permissions": "0755", "content": STEP_RUNNER_SCRIPT}


def first_boot_runcmd(prelude: Sequence[str], steps: Sequence[FirstBootStep], node_name: str) -> list[str]:
    """runcmd: `set -e` (an essential step that fails stops the boot), what every step needs in its environment
    (the proxy's variables), the steps, the report."""
    return ["set -e", *prelude, *(step.line() for step in steps), report_line(node_name)]
