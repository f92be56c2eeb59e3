#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, its driver and NVML, and no kubelet (run as root): for every profile document
# in PROFILES_DIR (NAME.yaml, one time-slicing profile each, as the program renders them):
#   - GPU Feature Discovery, one-shot, writes the labels it would put on the node under that config;
#   - the device plugin starts under that config and registers with mini-kubelet (the kubelet's registration
#     server), which reads its first ListAndWatch (the advertised devices) and Allocates one device, then two.
# Both get the environment the GPU Operator v26.7.0 gives their containers (assets/state-device-plugin and
# assets/gpu-feature-discovery 0500_daemonset.yaml; controllers/object_controls.go TransformDevicePlugin with
# cdi.enabled true, as the program sets it, and the chart's mig.strategy single), with the driver on the host:
# the paths the operator's validator writes for a host driver (NVIDIA_DRIVER_ROOT=/), here without a container.
# Everything is written under OUT_DIR/raw.tar.gz; a summary table goes to stdout.
#
# Usage: gpu-run.sh BIN_DIR PROFILES_DIR OUT_DIR [ORDER_FILE] [DEADLINE_SECONDS]
#   ORDER_FILE lists "MODE NAME" per line (MODE: cdi = the program's ClusterPolicy, envvar = the DaemonSet's
#   defaults without CDI, device specs passed); default: cdi for every profile. No new plugin run starts after
#   DEADLINE_SECONDS (default 420), so a call ends inside its limit whatever happens.
set -uo pipefail

BIN="$(cd "$1" && pwd)"
PROFILES="$(cd "$2" && pwd)"
OUT="$3"
ORDER="${4:-}"
DEADLINE="${5:-420}"
W="$(mktemp -d)"
mkdir -p "$W/gfd" "$W/plugin" "$W/kubelet" "$W/cdi" "$OUT"
start=$SECONDS
PLUGIN_DIR=/var/lib/kubelet/device-plugins

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -a
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,uuid,compute_cap,mig.mode.current \
    --format=csv
  cat /sys/class/dmi/id/product_name 2>&1
  ls -l /dev/nvidia* /dev/nvidia-caps 2>&1
  ldd "$BIN/nvidia-device-plugin" "$BIN/gpu-feature-discovery"
  for b in gpu-feature-discovery nvidia-device-plugin; do "$BIN/$b" --version; done
} >"$W/machine.txt" 2>&1

# GFD for every profile, eight at a time: one-shot, labels to a file instead of a NodeFeature object.
gfd_one() {
  local name="$1"
  MIG_STRATEGY=single GFD_FAIL_ON_INIT_ERROR=true NODE_NAME=h200-vm \
    timeout 60 "$BIN/gpu-feature-discovery" --oneshot --no-timestamp --use-node-feature-api=false \
    --config-file "$PROFILES/$name.yaml" --output-file "$W/gfd/$name.labels" >"$W/gfd/$name.log" 2>&1
  echo $? >"$W/gfd/$name.rc"
}
export -f gfd_one
export BIN PROFILES W
(cd "$PROFILES" && ls -- *.yaml) | sed 's/\.yaml$//' | xargs -P 8 -I{} bash -c 'gfd_one "$@"' _ {}
echo "gfd: $(ls "$W/gfd" | grep -c '\.rc$') profiles in $((SECONDS - start)) s"

if [[ -n "$ORDER" ]]; then cp "$ORDER" "$W/order.txt"; else
  (cd "$PROFILES" && ls -- *.yaml) | sed 's/\.yaml$//; s/^/cdi /' >"$W/order.txt"
fi

# The operator's environment for the nvidia-device-plugin container, then the mode's strategy.
plugin_env=(
  PASS_DEVICE_SPECS=true FAIL_ON_INIT_ERROR=true DEVICE_ID_STRATEGY=uuid
  NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=all MPS_ROOT=/run/nvidia/mps
  MIG_STRATEGY=single NVIDIA_MIG_MONITOR_DEVICES=all
  NVIDIA_DRIVER_ROOT=/ DRIVER_ROOT_CTR_PATH=/ NVIDIA_DEV_ROOT=/ DEV_ROOT_CTR_PATH=/
)
cdi_env=(
  CDI_ENABLED=true DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri CDI_ANNOTATION_PREFIX=cdi.k8s.io/
  NVIDIA_CDI_HOOK_PATH=/usr/local/nvidia/toolkit/nvidia-cdi-hook
)
envvar_env=(DEVICE_LIST_STRATEGY=envvar)

mkdir -p "$PLUGIN_DIR"
while read -r mode name; do
  [[ -n "$name" ]] || continue
  run="$mode-$name"
  if ((SECONDS - start > DEADLINE)); then
    echo "deadline: $run not run" | tee -a "$W/skipped.txt"
    continue
  fi
  rm -f "$PLUGIN_DIR"/*.sock
  "$BIN/mini-kubelet" --timeout 30s --out "$W/kubelet/$run.json" 2>"$W/kubelet/$run.err" &
  kubelet=$!
  for _ in $(seq 100); do [[ -S "$PLUGIN_DIR/kubelet.sock" ]] && break; sleep 0.05; done
  if [[ "$mode" == cdi ]]; then extra=("${cdi_env[@]}"); else extra=("${envvar_env[@]}"); fi
  env "${plugin_env[@]}" "${extra[@]}" CONFIG_FILE="$PROFILES/$name.yaml" \
    "$BIN/nvidia-device-plugin" >"$W/plugin/$run.log" 2>&1 &
  plugin=$!
  # Whichever ends first: the kubelet with its report, or the plugin with an error.
  wait -n "$kubelet" "$plugin"
  kill -TERM "$kubelet" "$plugin" 2>/dev/null
  wait "$kubelet"; echo $? >"$W/kubelet/$run.rc"
  wait "$plugin"; echo $? >"$W/plugin/$run.rc"
  if [[ "$mode" == cdi ]]; then cp -f /var/run/cdi/* "$W/cdi/" 2>/dev/null; fi
done <"$W/order.txt"
echo "plugin: $(ls "$W/kubelet" | grep -c '\.rc$') runs, $((SECONDS - start)) s in all"

tar -czf "$OUT/raw.tar.gz" -C "$W" .
python3 - "$W" <<'EOF'
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
print(open(w / "machine.txt").read().split("\n", 1)[0])
for line in (w / "order.txt").read_text().splitlines():
    mode, name = line.split()
    labels = {}
    path = w / "gfd" / f"{name}.labels"
    if path.exists():
        labels = dict(l.split("=", 1) for l in path.read_text().splitlines() if "=" in l)
    gfd = " ".join(f"{k.split('.', 2)[-1]}={labels.get(k, '-')}" for k in (
        "nvidia.com/gpu.count", "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "nvidia.com/gpu.product"))
    report = w / "kubelet" / f"{mode}-{name}.json"
    if report.exists():
        r = json.loads(report.read_text())
        one = (r.get("allocate") or [{}])[0]
        resp = one.get("response") or {}
        got = resp.get("cdiDevices") or resp.get("devices") or resp.get("envs") or one.get("error")
        plugin = f"{r['register']['resourceName']} x{r['deviceCount']} allocate1={json.dumps(got)[:160]}"
    else:
        plugin = "no report: " + (w / "kubelet" / f"{mode}-{name}.err").read_text().strip()[-200:]
    print(f"{mode:6} {name:32} gfd[{gfd}] plugin[{plugin}]")
EOF
