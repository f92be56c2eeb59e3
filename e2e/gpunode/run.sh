#!/usr/bin/env bash
# On the lent GPU machine, as root, from the repository root: a whole RKE2-shaped GPU node running the program's
# objects (docs/verification.md, "On a real GPU: a real kubelet runs the program's pods").
#   CARRY (default build/gpunode-carry, from e2e/gpunode/prepare-carry.sh): bin-*.tar.xz (e2e/build-node-tools.sh),
#   rootfs/ (Debian packages, the pause program), objects/ (python -m tests.gpu_node_recording objects), pki/.
# Steps, each logged with its time: etcd, kube-apiserver, kube-controller-manager, kube-scheduler; containerd at
# RKE2's paths under a supervisor that renders RKE2's config.toml at each start (as RKE2's agent does); the kubelet,
# registering the node with the program's labels and taint; the NVIDIA Container Toolkit's installer in the toolkit
# container's mounts and environment (the operator's, with the program's toolkit.env); the device plugin pod under
# the program's RuntimeClass and x4 profile; five copies of the program's smoke Job; `gpu-pool node-check` on the
# host, then the unattended repair's node-check Job as the program renders it, on the kubelet.
# If the toolkit's installer cannot install (the run of 2026-12-05 stopped there), the toolkit's documented path for
# a pre-installed driver is taken instead (its runtimes, CDI from `nvidia-ctk cdi generate --driver-root=/`, the
# runtime in CDI mode), and toolkit-path.txt says which path ran and why.
# Everything goes to $OUT/gpunode.tar.gz (and $OUT/summary.txt, $OUT/run.log), whatever step fails.
set -uo pipefail

REPO="$(pwd)"
CARRY="$(cd "${1:-build/gpunode-carry}" && pwd)"
# DEADLINE: the waits give up after it; HARD: the script collects and exits at it, whatever it is doing. Set HARD
# below the device call's limit: a call cut short by the device tool's own limit brings back nothing (the session
# of 2026-12-05 15:10 got 258 s and nothing back), so the script stops itself first.
DEADLINE="${DEADLINE:-500}"
HARD="${HARD:-$((DEADLINE + 60))}"
: "${OUT:?set OUT to the folder that comes back}"
W=/tmp/gpunode
R="$W/run" # what comes back
rm -rf "$W" && mkdir -p "$R/logs" "$R/pods" "$R/cdi" "$R/containerd" "$W/bin" "$W/img"
# The log reaches $OUT as it is written: even a run killed from outside brings back how far it got.
exec > >(tee -a "$R/run.log" "$OUT/run.log") 2>&1
step() { echo "== $(date -u +%T) [${SECONDS}s] $*"; }
late() { ((SECONDS > DEADLINE)); }
OBJ="$CARRY/objects"
NODE="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$OBJ/node.json")"
SOCK="$(cat "$OBJ/containerd-socket.txt")"
export PATH="$W/bin:$PATH"
export KUBECONFIG="$W/kubeconfig" KUBE_SERVER=https://127.0.0.1:6443
kube() { python3 "$REPO/e2e/gpunode/kube.py" "$@"; }
# A pod's log through the API server, else from the kubelet's own files (CRI lines: time, stream, tag, text): the
# API server reaches the kubelet at the node's address, which a machine without iproute2 may not report.
pod_log() {
  local out f
  if out="$(kube logs "$1" "$2" 2>/dev/null)"; then printf '%s\n' "$out"; return 0; fi
  for f in /var/log/pods/"$1"_"$2"_*/*/*.log; do [[ -f "$f" ]] && cut -d' ' -f4- "$f"; done
}
job_image() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["image"])' "$1"; }
PIDS=()

collect() {
  step "collect"
  touch "$W/stop"
  kube dump >"$R/dump-final.json" 2>/dev/null
  for p in $(python3 -c 'import json,sys; print(" ".join(i["metadata"]["namespace"] + "/" + i["metadata"]["name"] for i in json.load(open(sys.argv[1]))["items"] if i["kind"] == "Pod"))' "$R/dump-final.json" 2>/dev/null); do
    pod_log "${p%/*}" "${p#*/}" >"$R/pods/${p#*/}.log" 2>&1
    kube get "/api/v1/namespaces/${p%/*}/pods/${p#*/}" >"$R/pods/${p#*/}.json" 2>/dev/null
  done
  cp -f /var/run/cdi/* /etc/cdi/* "$R/cdi/" 2>/dev/null
  cp -f /etc/containerd/config.toml "$R/containerd/toolkit-config.toml" 2>/dev/null
  cp -f /etc/containerd/conf.d/99-nvidia.toml "$R/containerd/toolkit-99-nvidia.toml" 2>/dev/null
  cp -f "$W"/rke2-config-*.toml "$R/containerd/" 2>/dev/null
  cp -f /usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml "$R/containerd/nvidia-container-runtime.toml" 2>/dev/null
  ls -la /usr/local/nvidia/toolkit >"$R/containerd/toolkit-dir.txt" 2>&1
  cp -f "$CARRY/objects/digests.json" "$R/digests.json"
  python3 "$REPO/e2e/gpunode/summarize.py" "$R" "$OBJ" >"$R/summary.txt" 2>&1
  # Only what this script started: each by its id, the supervised containerd through its supervisor.
  pkill -P "${SUPERVISOR:-0}" -x containerd 2>/dev/null
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 1
  kill "${WATCHDOG:-0}" 2>/dev/null
  cp -f "$R/summary.txt" "$R/summary.json" "$OUT/" 2>/dev/null
  tar -czf "$OUT/gpunode.tar.gz" -C "$R" . && ls -la "$OUT"
}
trap collect EXIT
# A TERM (the device tool's limit, or the watchdog) collects, then exits. bash skips the EXIT trap when a signal
# trap exits while stdout is the tee above, and the tee may already be gone (timeout signals the whole group): so
# this trap ignores further signals, writes to the file directly and calls collect itself.
trap 'trap "" TERM INT PIPE; trap - EXIT; exec >>"$OUT/run.log" 2>&1; echo "== stopped by a signal at ${SECONDS}s"; collect; exit 143' TERM INT
(sleep "$HARD" && kill -TERM $$) 2>/dev/null &
WATCHDOG=$!

step "unpack"
unxz_() { if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi; }
for f in "$CARRY"/bin-*.tar.xz; do unxz_ "$f" | tar -x -C "$W/bin"; done
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do ln -sf kube-node "$W/bin/$c"; done

step "machine"
{
  date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; cat /etc/os-release 2>/dev/null | head -3; ldd --version | head -1
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,uuid,compute_cap --format=csv
  echo "cgroup: $(stat -fc %T /sys/fs/cgroup) $(cat /sys/fs/cgroup/cgroup.controllers)"
  grep -E 'overlay|bridge' /proc/filesystems; echo "modules: $(grep -cE '^nvidia' /proc/modules 2>&1)"; ls /sys/module | grep -E '^(bridge|veth|overlay|br_netfilter)$' | tr '\n' ' '; echo
  ip -4 -o addr; ip route; command -v unshare ldconfig nvcc iptables || true; ls /usr/local/nvidia
  for b in kubelet etcd containerd runc nvidia-ctk nvidia-device-plugin; do echo "$b: $("$W/bin/$b" --version 2>&1 | head -1)"; done
  "$W/bin/bridge" 2>&1 | head -1
} >"$R/machine.txt" 2>&1
cat "$R/machine.txt"

# What a systemd host gives every node and this VM may not: / a shared mount (the device plugin's HostToContainer
# mounts need it), /dev/kmsg (the kubelet's OOM watcher), /etc/resolv.conf (its pods' DNS file).
mount --make-rshared /
[[ -e /dev/kmsg ]] || ln -s /dev/console /dev/kmsg
[[ -e /etc/resolv.conf ]] || : >/etc/resolv.conf
# The kubelet gives each sandbox oom_score_adj -998, which only a process with CAP_SYS_RESOURCE may set below its
# own: a root without it (a sandboxed build machine rehearsing this script) fails every sandbox with runc's "can't
# get final child's PID from pipe". There containerd caps the score at its own, as k3s does for rootless nodes.
RESTRICT_OOM=""
if ! (echo -998 >/proc/self/oom_score_adj) 2>/dev/null; then
  RESTRICT_OOM=$'\n  restrict_oom_score_adj = true'
  echo "no CAP_SYS_RESOURCE here: containerd's restrict_oom_score_adj on"
fi
# (The lent machine has no iproute2: the CNI plugins speak netlink themselves, but this script cannot use `ip`.)
if [[ -d /sys/module/bridge ]]; then echo "bridge: kernel module present"; else echo "bridge: no kernel module"; fi

# The node's address: the machine's own, else one on a dummy link (nothing outside is reached anyway).
NODE_IP="$( (ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1; hostname -I 2>/dev/null | tr ' ' '\n') | grep -v '^$' | head -1)"
if [[ -z "$NODE_IP" ]]; then
  ip link add gpunode0 type dummy && ip addr add 10.200.0.2/24 dev gpunode0 && ip link set gpunode0 up
  NODE_IP=10.200.0.2
fi
step "node $NODE at $NODE_IP"

step "etcd"
etcd --data-dir "$W/etcd" --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 >"$R/logs/etcd.log" 2>&1 &
PIDS+=($!)

step "kube-apiserver"
TOKEN="$(cat "$CARRY/pki/token")"
export KUBE_TOKEN="$TOKEN"
echo "$TOKEN,admin,admin,system:masters" >"$W/tokens.csv"
kube-apiserver --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 --advertise-address="$NODE_IP" \
  --secure-port=6443 --allow-privileged=true --cert-dir="$W/apiserver" --token-auth-file="$W/tokens.csv" --authorization-mode=AlwaysAllow \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-account-key-file="$CARRY/pki/sa.pub" \
  --service-account-signing-key-file="$CARRY/pki/sa.key" --service-cluster-ip-range=10.43.0.0/16 \
  >"$R/logs/kube-apiserver.log" 2>&1 &
PIDS+=($!)
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: node, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: "$TOKEN"}}]
contexts: [{name: node, context: {cluster: node, user: admin}}]
current-context: node
EOF
for _ in $(seq 120); do kube raw /readyz >/dev/null 2>&1 && break; sleep 0.5; done
kube raw '/readyz?verbose' | tail -1

step "kube-controller-manager, kube-scheduler"
kube-controller-manager --kubeconfig="$KUBECONFIG" --leader-elect=false --service-account-private-key-file="$CARRY/pki/sa.key" \
  --root-ca-file="$W/apiserver/apiserver.crt" --use-service-account-credentials=false >"$R/logs/kube-controller-manager.log" 2>&1 &
PIDS+=($!)
kube-scheduler --kubeconfig="$KUBECONFIG" --leader-elect=false >"$R/logs/kube-scheduler.log" 2>&1 &
PIDS+=($!)

# --- containerd as RKE2 runs it -------------------------------------------------------------------------------
RKE2=/var/lib/rancher/rke2
CFG="$RKE2/agent/etc/containerd/config.toml"
CNI_CONF="$RKE2/agent/etc/cni/net.d"
mkdir -p "$(dirname "$CFG")" "$CNI_CONF" "$(dirname "$SOCK")"
# RKE2's agent writes config.toml at every start from k3s's containerd template (version 3 for containerd 2), adding
# a runtime for each NVIDIA runtime binary it finds (k3s pkg/agent/containerd/nvidia.go: /usr/local/nvidia/toolkit
# is where the GPU Operator's toolkit installs them); it never reads the toolkit's /etc/containerd files.
render_rke2_config() {
  local n="$1"
  {
    cat <<EOF
# File generated by rke2 (emulated by e2e/gpunode/run.sh). DO NOT EDIT. Use config-v3.toml.tmpl instead.
version = 3
root = "$RKE2/agent/containerd"
state = "$(dirname "$SOCK")"

[grpc]
  address = "$SOCK"

[plugins.'io.containerd.internal.v1.opt']
  path = "$RKE2/agent/containerd"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false$RESTRICT_OOM
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  device_ownership_from_security_context = false

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "$SNAPSHOTTER"
  disable_snapshot_annotations = true

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "docker.io/rancher/mirrored-pause:3.6"

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dir = "$W/bin"
  conf_dir = "$CNI_CONF"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
EOF
    for pair in nvidia=nvidia-container-runtime nvidia-experimental=nvidia-container-runtime-experimental \
      nvidia-cdi=nvidia-container-runtime.cdi; do
      if [[ -f "/usr/local/nvidia/toolkit/${pair#*=}" ]]; then
        printf "\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'%s']\n  runtime_type = \"io.containerd.runc.v2\"\n" "${pair%%=*}"
        printf "\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'%s'.options]\n  BinaryName = \"%s\"\n  SystemdCgroup = false\n" \
          "${pair%%=*}" "/usr/local/nvidia/toolkit/${pair#*=}"
      fi
    done
  } >"$CFG"
  cp "$CFG" "$W/rke2-config-$n.toml"
}
cat >"$CNI_CONF/10-gpunode.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "gpunode", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.42.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
EOF
# overlayfs as RKE2's default snapshotter, unless this root cannot hold an overlay (then containerd's native one).
SNAPSHOTTER=overlayfs
mkdir -p "$RKE2/probe/l" "$RKE2/probe/u" "$RKE2/probe/w" "$RKE2/probe/m"
if mount -t overlay overlay -o "lowerdir=$RKE2/probe/l,upperdir=$RKE2/probe/u,workdir=$RKE2/probe/w" "$RKE2/probe/m"; then
  umount "$RKE2/probe/m"
else
  SNAPSHOTTER=native
fi
echo "snapshotter: $SNAPSHOTTER"
step "containerd (supervised: restarted with a fresh config.toml whenever it exits, as RKE2's agent does)"
(
  n=0
  while [[ ! -f "$W/stop" ]]; do
    n=$((n + 1)); render_rke2_config "$n"
    echo "== $(date -u +%T) containerd start $n" >>"$R/logs/containerd.log"
    containerd --config "$CFG" >>"$R/logs/containerd.log" 2>&1
    echo "== $(date -u +%T) containerd start $n exited $?" >>"$R/logs/containerd.log"
    sleep 1
  done
) &
SUPERVISOR=$!
PIDS+=($!)
for _ in $(seq 60); do [[ -S "$SOCK" ]] && ctr -a "$SOCK" version >/dev/null 2>&1 && break; sleep 0.5; done
ctr -a "$SOCK" version

step "images (from Debian packages; the CUDA program compiled with this machine's nvcc)"
mkdir -p "$W/img/base" "$W/img/pause" "$W/img/smoke/opt/vectoradd/lib" "$W/img/plugin/usr/bin"
unxz_ "$CARRY/rootfs/base.tar.xz" | tar -x -C "$W/img/base"
cp "$CARRY/rootfs/pause" "$W/img/pause/pause"
cp "$REPO/e2e/gpunode/smoke.sh" "$W/img/smoke/smoke.sh"
cp "$W/bin/nvidia-device-plugin" "$W/img/plugin/usr/bin/"
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if "$NVCC" -O2 -arch=native -cudart static -o "$W/img/smoke/opt/vectoradd/vectorAdd" "$REPO/e2e/gpunode/vector_add.cu" >"$R/logs/nvcc.log" 2>&1; then
  for lib in $(ldd "$W/img/smoke/opt/vectoradd/vectorAdd" | grep -o '/[^ ]*\.so[^ ]*'); do cp -L "$lib" "$W/img/smoke/opt/vectoradd/lib/"; done
  ls -la "$W/img/smoke/opt/vectoradd" "$W/img/smoke/opt/vectoradd/lib" >>"$R/logs/nvcc.log"
else
  echo "nvcc failed: the smoke image runs nvidia-smi only"; cat "$R/logs/nvcc.log"
fi
chmod -R a+rX "$W/img"
OCI="python3 $REPO/e2e/gpunode/oci_image.py"
$OCI "$W/pause.tar" docker.io/rancher/mirrored-pause:3.6 --entrypoint '["/pause"]' "$W/img/pause"
$OCI "$W/smoke.tar" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["spec"]["template"]["spec"]["containers"][0]["image"])' "$OBJ/smoke-jobs.json")" \
  --entrypoint '["/bin/sh","/smoke.sh"]' --env SMOKE_HOLD_SECONDS=45 --env PATH=/usr/local/nvidia/bin:/usr/bin:/bin "$W/img/base" "$W/img/smoke"
$OCI "$W/plugin.tar" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["containers"][0]["image"])' "$OBJ/device-plugin-pod.json")" \
  "$W/img/base" "$W/img/plugin"
# The node-check Job's image: Debian's Python 3.11 on the same base (its payload needs 3.11 or newer).
mkdir -p "$W/img/python"
unxz_ "$CARRY/rootfs/python.tar.xz" | tar -x -C "$W/img/python"
$OCI "$W/python.tar" "$(job_image "$OBJ/node-check-job.json")" "$W/img/base" "$W/img/python"
for t in pause smoke plugin python; do ctr -a "$SOCK" -n k8s.io images import --snapshotter "$SNAPSHOTTER" "$W/$t.tar" 2>&1 | tail -1; done
ctr -a "$SOCK" -n k8s.io images ls -q

step "kubelet"
mkdir -p /var/lib/kubelet "$W/kubelet"
cat >"$W/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$SOCK
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
EOF
LABELS="$(python3 -c 'import json,sys; print(",".join(f"{k}={v}" for k, v in json.load(open(sys.argv[1]))["labels"].items()))' "$OBJ/node.json")"
TAINT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["taint"])' "$OBJ/node.json")"
kubelet --config="$W/kubelet/config.yaml" --kubeconfig="$KUBECONFIG" --hostname-override="$NODE" --node-ip="$NODE_IP" \
  --node-labels="$LABELS" --register-with-taints="$TAINT" --v=2 >"$R/logs/kubelet.log" 2>&1 &
PIDS+=($!)
ready() { kube get "/api/v1/nodes/$NODE" 2>/dev/null | python3 -c 'import json,sys; sys.exit(0 if any(c["type"] == "Ready" and c["status"] == "True" for c in json.load(sys.stdin)["status"]["conditions"]) else 1)'; }
for _ in $(seq 90); do ready && break; sleep 1; done
ready && echo "node $NODE Ready" || tail -40 "$R/logs/kubelet.log"

step "the program's objects"
for f in namespaces runtimeclass time-slicing-config; do kube apply "$OBJ/$f.json"; done
NS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["namespace"])' "$OBJ/device-plugin-pod.json")"
kube configmap "$NS" nvidia-device-plugin-entrypoint entrypoint.sh="$REPO/e2e/gpunode/device-plugin-entrypoint.sh"
# What the operator's validator writes once it finds a driver on the host (nvidia-validator createStatusFile).
mkdir -p /run/nvidia/validations /run/nvidia/toolkit /run/nvidia/driver
printf 'IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\nNVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n' \
  >/run/nvidia/validations/driver-ready

step "NVIDIA Container Toolkit installer (the toolkit container's mounts and environment)"
# The lent machine's driver files are a read-only /usr/local/nvidia, which is also the chart's toolkit.installDir
# (the run of 2026-12-05 stopped there: tests/fixtures/gpu_node_blocked). A writable layer over it, as that folder
# is on a node whose driver lives elsewhere; the driver's files stay visible beneath it.
if ! touch /usr/local/nvidia/.gpunode-probe 2>/dev/null; then
  mkdir -p "$W/nvidia-upper" "$W/nvidia-work"
  if mount -t overlay overlay -o "lowerdir=/usr/local/nvidia,upperdir=$W/nvidia-upper,workdir=$W/nvidia-work" /usr/local/nvidia; then
    echo "/usr/local/nvidia is read-only here: a writable overlay on it"
  else
    # An overlay needs a lower filesystem it supports: else a writable copy, bound over the folder.
    cp -a /usr/local/nvidia "$W/nvidia-copy" && mount --bind "$W/nvidia-copy" /usr/local/nvidia &&
      echo "/usr/local/nvidia is read-only here and takes no overlay: a writable copy bound over it"
  fi
else
  rm -f /usr/local/nvidia/.gpunode-probe
fi
mkdir -p /artifacts/deb/usr/bin
for b in nvidia-ctk nvidia-container-runtime nvidia-container-runtime.cdi nvidia-container-runtime.legacy \
  nvidia-container-runtime-hook nvidia-cdi-hook nvidia-ctk-installer; do cp "$W/bin/$b" /artifacts/deb/usr/bin/; done
ln -sf nvidia-ctk-installer /artifacts/deb/usr/bin/nvidia-toolkit
python3 - "$OBJ/toolkit-container.json" >"$W/toolkit-env.sh" <<'EOF'
import json, shlex, sys
spec = json.load(open(sys.argv[1]))
print("MOUNTS=(" + " ".join(shlex.quote(f"{m['hostPath']}:{m['mountPath']}:{m['readOnly']}") for m in spec["mounts"]) + ")")
print("ENVS=(" + " ".join(shlex.quote(f"{k}={v}") for k, v in spec["env"].items()) + ")")
EOF
cat "$W/toolkit-env.sh"
# shellcheck disable=SC1091
source "$W/toolkit-env.sh"
cat >"$W/toolkit-ctr.sh" <<'EOF'
set -e
for m in "${MOUNTS[@]}"; do
  IFS=: read -r host ctr ro <<<"$m"
  mkdir -p "$host" "$ctr"
  if [[ "$host" == / ]]; then mount --rbind / "$ctr"; else mount --bind "$host" "$ctr"; fi
  if [[ "$ro" == True ]]; then mount -o remount,bind,ro "$ctr"; fi
done
set +e
# The entrypoint's `set -o allexport; . driver-ready` puts the validator's variables in the environment.
# --ignore-errors: libnvidia-container and nvidia-container-cli (C, legacy mode only) are not built, and the
# installer refuses to install without them; summarize.py lists every error it ignored, so no other can hide.
exec env -i PATH=/artifacts/deb/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  $(cat /run/nvidia/validations/driver-ready) "${ENVS[@]}" nvidia-toolkit --ignore-errors
EOF
# In a session of its own: the installer signals containerd with the PID from the socket's peer credentials
# (nvidia-ctk-installer containerd_linux.go SignalContainerd), and where containerd wrote to the socket before the
# installer asked for credentials the PID reads 0, and kill(0, SIGHUP) reaches the caller's whole process group (a
# rehearsal of this script on a loaded machine lost its control plane so). On a node the operator's toolkit pod is
# a process group of its own too.
setsid unshare -m --propagation private bash -c "$(declare -p MOUNTS ENVS); $(cat "$W/toolkit-ctr.sh")" >"$R/logs/toolkit.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do
  grep -q 'nvidia-cdi' "$CFG" 2>/dev/null && grep -q "containerd start [2-9]" "$R/logs/containerd.log" && break
  sleep 0.5
done
grep -c "containerd start" "$R/logs/containerd.log"
if ! grep -q "'nvidia'" "$CFG"; then
  # The toolkit did not restart containerd (or it did not exit): restart it as the node's next RKE2 start would.
  echo "containerd not restarted by the toolkit after 60 s: restarting it as RKE2's next start would"
  pkill -P "$SUPERVISOR" -x containerd; sleep 3
fi
for _ in $(seq 60); do ctr -a "$SOCK" version >/dev/null 2>&1 && break; sleep 0.5; done
tail -30 "$R/logs/toolkit.log"
if [[ -x /usr/local/nvidia/toolkit/nvidia-container-runtime ]] && grep -q "'nvidia'" "$CFG"; then
  echo "installer: the toolkit's own installer (nvidia-toolkit), in the operator's mounts and environment" >"$R/toolkit-path.txt"
else
  # The toolkit's documented path for a driver installed on the host: its runtimes where RKE2 looks for them, CDI
  # specs generated from the driver root, the runtime in CDI mode (nvidia-ctk's own config, then --set).
  why="$(grep -m1 -iE 'error|fail' "$R/logs/toolkit.log" || echo 'the installer exited without installing the runtime')"
  printf 'fallback-cdi: the installer did not install its runtime (%s); installed the toolkit v1.20.0 binaries into /usr/local/nvidia/toolkit, generated CDI with nvidia-ctk cdi generate --driver-root=/, runtime in cdi mode\n' "$why" >"$R/toolkit-path.txt"
  TK=/usr/local/nvidia/toolkit
  mkdir -p "$TK/.config/nvidia-container-runtime" /var/run/cdi
  for b in nvidia-ctk nvidia-container-runtime nvidia-container-runtime.cdi nvidia-container-runtime.legacy \
    nvidia-container-runtime-hook nvidia-cdi-hook; do cp -f "$W/bin/$b" "$TK/$b"; done
  nvidia-ctk config default --output="$TK/.config/nvidia-container-runtime/config.toml"
  nvidia-ctk config --in-place --config="$TK/.config/nvidia-container-runtime/config.toml" \
    --set nvidia-container-runtime.mode=cdi \
    --set nvidia-container-runtime.modes.cdi.default-kind=management.nvidia.com/gpu \
    --set nvidia-ctk.path="$TK/nvidia-ctk" --set nvidia-container-runtime-hook.path="$TK/nvidia-container-runtime-hook"
  # XDG_CONFIG_HOME: the runtime reads its config from there, as the installer's wrapper would point it.
  for b in nvidia-container-runtime nvidia-container-runtime.cdi; do
    mv "$TK/$b" "$TK/$b.real"
    printf '#!/bin/sh\nXDG_CONFIG_HOME=%s/.config exec %s/%s.real "$@"\n' "$TK" "$TK" "$b" >"$TK/$b" && chmod 755 "$TK/$b"
  done
  nvidia-ctk cdi generate --driver-root=/ --vendor=management.nvidia.com --class=gpu --nvidia-cdi-hook-path="$TK/nvidia-cdi-hook" \
    --output=/var/run/cdi/management.nvidia.com-gpu.yaml >>"$R/logs/toolkit-fallback.log" 2>&1
  echo "fallback CDI generate rc=$?"
  cat "$R/toolkit-path.txt"
  pkill -P "$SUPERVISOR" -x containerd; sleep 3
  for _ in $(seq 60); do ctr -a "$SOCK" version >/dev/null 2>&1 && grep -q "'nvidia'" "$CFG" && break; sleep 0.5; done
fi
# The installer's runtime wrappers run plain runc unless /proc/modules lists `nvidia` (installer/executables.go);
# a machine whose driver works but is not listed there (built in) would run every GPU pod without its devices.
if ! grep -q '^nvidia ' /proc/modules 2>/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  for f in /usr/local/nvidia/toolkit/nvidia-container-runtime*; do
    grep -q '^cat /proc/modules' "$f" 2>/dev/null && sed -i '/^cat \/proc\/modules/,/^fi$/d' "$f"
  done
  echo "deviation: /proc/modules does not list nvidia on this machine though nvidia-smi works: the wrappers' module check removed" | tee -a "$R/toolkit-path.txt"
fi
grep -n "runtimes\.'nvidia" "$CFG"

step "the unattended repair's node-check Job (the program's spec; no GPU slot needed, so it starts now: after the toolkit, whose containerd restart ends running containers' tasks)"
# hostPath /etc/machine-id is of type File: a machine without one gets one, as systemd's first boot would write.
[[ -s /etc/machine-id ]] || { od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >/etc/machine-id; echo "wrote /etc/machine-id"; }
for f in node-check-namespace node-check-code node-check-job; do kube apply "$OBJ/$f.json"; done
NC_NS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["namespace"])' "$OBJ/node-check-job.json")"
NC_JOB="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["name"])' "$OBJ/node-check-job.json")"

step "nvidia-ctk cdi generate (the machine's driver root)"
nvidia-ctk cdi generate --driver-root=/ --output="$R/cdi/nvidia-ctk-generate.yaml" >"$R/logs/cdi-generate.log" 2>&1
echo "rc=$?"; tail -3 "$R/logs/cdi-generate.log"

# The device plugin looks for NVML under its driver root in fixed folders only (go-nvlib info/root.go
# tryResolveLibrary: /usr/lib64, /usr/lib/x86_64-linux-gnu, /lib64, ...), where a distribution's driver packages put
# it. This machine's driver lives in /usr/local/nvidia/lib64 (the run of 2026-12-06 20:43: "CDI --device-list-strategy
# options are only supported on NVML-based systems"), which a lab's node never has: a relative link where the plugin
# looks, which resolves inside its /host mount.
if [[ -e /usr/local/nvidia/lib64/libnvidia-ml.so.1 ]] &&
  ! ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 /usr/lib64/libnvidia-ml.so.1 >/dev/null 2>&1; then
  ln -s ../../local/nvidia/lib64/libnvidia-ml.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 &&
    echo "deviation: the driver's libraries are in /usr/local/nvidia/lib64 on this machine, where the device plugin does not look for NVML: linked /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 to it" | tee -a "$R/toolkit-path.txt"
fi
step "device plugin pod (RuntimeClass $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["runtimeClassName"])' "$OBJ/device-plugin-pod.json"))"
kube apply "$OBJ/device-plugin-pod.json"
for _ in $(seq 90); do
  [[ "$(kube get "/api/v1/nodes/$NODE" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["allocatable"].get("nvidia.com/gpu", 0))')" =~ ^[1-9] ]] && break
  late && break; sleep 1
done
kube get "/api/v1/namespaces/$NS/pods/nvidia-device-plugin" status.phase
pod_log "$NS" nvidia-device-plugin >"$R/logs/device-plugin.log" 2>&1; tail -20 "$R/logs/device-plugin.log"
kube get "/api/v1/nodes/$NODE" >"$R/node.json"
echo "nvidia.com/gpu (capacity allocatable): $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["status"]; print(s["capacity"].get("nvidia.com/gpu"), s["allocatable"].get("nvidia.com/gpu"))' "$R/node.json")"

step "five smoke Jobs"
kube apply "$OBJ/smoke-jobs.json"
SMOKE_NS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"][0]["metadata"]["namespace"])' "$OBJ/smoke-jobs.json")"
for _ in $(seq 120); do
  running="$(kube get "/api/v1/namespaces/$SMOKE_NS/pods" 2>/dev/null | python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["items"] if p["status"].get("phase") == "Running"))')"
  pending="$(kube get "/api/v1/namespaces/$SMOKE_NS/pods" 2>/dev/null | python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["items"] for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled" and c["status"] == "False"))')"
  ((running >= 4 && pending >= 1)) && break
  late && break; sleep 1
done
echo "running $running, unschedulable $pending"
kube dump >"$R/dump.json"
kube get "/api/v1/namespaces/$SMOKE_NS/pods" | python3 -c '
import json, sys
items = [{"apiVersion": "v1", "kind": "Pod", **p} for p in json.load(sys.stdin)["items"] if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in p["status"].get("conditions", []))]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, indent=2)' >"$R/pending.json"
kube get "/api/v1/nodes/$NODE" >"$R/node.json"

step "gpu-pool node-check"
EXPECT="$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["expect"]; print(" ".join(f"--expect-{k} {v}" for k, v in e.items()))' "$OBJ/node.json")"
# shellcheck disable=SC2086
python3 -m day2.node_check $EXPECT --node "$NODE" -o json --save-nvml "$R/nvml.json" >"$R/node-check.json" 2>"$R/logs/node-check.err"
echo "node-check exit $?"; cat "$R/node-check.json" | head -40

step "the node-check Job's report"
for _ in $(seq 60); do
  [[ "$(kube get "/apis/batch/v1/namespaces/$NC_NS/jobs/$NC_JOB" status.succeeded status.failed 2>/dev/null | tr -d ' ')" =~ [0-9] ]] && break
  late && break; sleep 1
done
kube get "/apis/batch/v1/namespaces/$NC_NS/jobs/$NC_JOB" status.succeeded status.failed
for p in $(kube get "/api/v1/namespaces/$NC_NS/pods" | python3 -c 'import json,sys; print(" ".join(p["metadata"]["name"] for p in json.load(sys.stdin)["items"]))'); do
  pod_log "$NC_NS" "$p" >"$R/node-check-job-report.json"
done
head -c 1500 "$R/node-check-job-report.json"; echo

step "wait for the Jobs (the fifth runs once a slot frees)"
for _ in $(seq 150); do
  done_="$(kube get "/apis/batch/v1/namespaces/$SMOKE_NS/jobs" | python3 -c 'import json,sys; print(sum(1 for j in json.load(sys.stdin)["items"] if j["status"].get("succeeded") or j["status"].get("failed")))')"
  ((done_ >= 5)) && break
  late && break; sleep 2
done
echo "jobs done: $done_"
step "done in ${SECONDS}s"
