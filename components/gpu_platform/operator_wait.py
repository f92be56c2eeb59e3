"""The wait for the GPU Operator after its release: the platform's one long wait, and it talks.

Helm's own wait (`--wait`, what the release does unless skipAwait) prints nothing for up to 15 minutes and ends
in "context deadline exceeded". So the release skips it, and this step waits for the operator's Deployment
instead: a line at least every GPU_POOL_PROGRESS_SECONDS (60) with kubectl's own last message and the
operator pods' state, and on timeout what it waited for and the likeliest cause from what it last saw.
TIMEOUT_SECONDS comes from the environment.
"""

from __future__ import annotations

import shlex

from knowledge.gpu_operator_chart import CHART_NAME, OPERATOR_DEPLOYMENT, OPERATOR_POD_SELECTOR

OPERATOR_WAIT_SECONDS = 900

_PODS_JSONPATH = (
    '{range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}'
    '{.status.containerStatuses[*].state.waiting.reason}{"; "}{end}'
)


def operator_wait_command(kubectl: str, namespace: str) -> str:
    ns = shlex.quote(namespace)
    deploy = f"deployment/{OPERATOR_DEPLOYMENT}"
    pods = shlex.quote(OPERATOR_POD_SELECTOR)
    describe = f"kubectl -n {ns} describe pods -l {pods}"
    # The cases run on kubectl's last message and the pods' state, most specific first.
    causes = [
        ("*ImagePullBackOff*|*ErrImagePull*", f"the operator's image cannot be pulled from this cluster: {describe}"),
        ("*CrashLoopBackOff*", f"the operator crashes: kubectl -n {ns} logs {deploy} --previous"),
        ("*NotFound*|*'not found'*", f"the release made no {deploy}: helm -n {ns} status {CHART_NAME}"),
        (
            "*Unauthorized*|*[Ff]orbidden*|*certificate*",
            "the API server refuses the kubeconfig's credentials: check gpu-pool:kubernetes",
        ),
        (
            "*'connection refused'*|*'Unable to connect'*|*'no such host'*|*'i/o timeout'*",
            "kubectl cannot reach the API server: check gpu-pool:kubernetes and the network",
        ),
        ("*Pending*", f"the operator pod is Pending, no node takes it: the Events of {describe}"),
    ]
    cases = "\n".join(f"      {pattern}) cause={shlex.quote(text)} ;;" for pattern, text in causes)
    return f"""set -u
timeout=${{TIMEOUT_SECONDS:-{OPERATOR_WAIT_SECONDS}}}
every=${{GPU_POOL_PROGRESS_SECONDS:-60}}
start=$(date +%s)
echo "waiting for {deploy} in {namespace} to be available (up to $((timeout / 60)) min)"
while :; do
  round=$(date +%s)
  if out=$({kubectl} -n {ns} rollout status {deploy} --timeout="${{every}}s" 2>&1); then
    printf '%s\\n' "$out" | tail -n 1
    exit 0
  fi
  last=$(printf '%s\\n' "$out" | grep -v 'timed out waiting' | tail -n 1)
  state=$({kubectl} -n {ns} get pods -l {pods} -o jsonpath={shlex.quote(_PODS_JSONPATH)} 2>&1)
  now=$(date +%s)
  echo "[$((now - start))s] still waiting: ${{last:-no message}}; operator pods: ${{state:-none}}"
  if [ $((now - start)) -ge "$timeout" ]; then
    case "$last $state" in
{cases}
      *) cause="kubectl -n {ns} describe {deploy}" ;;
    esac
    echo "{deploy} in {namespace} was not available after $((timeout / 60)) min: $cause (last: ${{last:-none}})" >&2
    exit 1
  fi
  rest=$((every - (now - round)))
  if [ "$rest" -gt 0 ]; then sleep "$rest"; fi
done
"""
