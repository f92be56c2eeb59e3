#!/usr/bin/env bash
# The one GPU call that recorded tests/fixtures/deviceplugin/h200*: copied beside gpu-run.sh into a folder with
# bin/*.xz (e2e/build-device-tools.sh's gpu-feature-discovery, nvidia-device-plugin, mini-kubelet), bin-v0.20.0/*.xz
# (the two built from the v0.20.0 tag) and profiles/ (`python -m tests.plugin_recording profiles`, plus
# order-v0.20.0.txt), it unpacks the binaries and runs gpu-run.sh with the pinned v0.19.3 on every recorded
# profile, then with v0.20.0 on the telling few. $OUT: where the device tool collects what comes back.
set -uo pipefail
cd "$(dirname "$0")"
unpack() { # DIR: each NAME.xz -> NAME, executable
  for f in "$1"/*.xz; do
    out="${f%.xz}"
    xz -dc "$f" >"$out" 2>/dev/null || python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$f" "$out"
    chmod +x "$out"
  done
}
unpack bin; unpack bin-v0.20.0
cp bin/mini-kubelet bin-v0.20.0/
bash gpu-run.sh bin profiles "$OUT/v0.19.3" profiles/order.txt 330 | tee "$OUT/summary-v0.19.3.txt"
bash gpu-run.sh bin-v0.20.0 profiles "$OUT/v0.20.0" profiles/order-v0.20.0.txt 90 | tee "$OUT/summary-v0.20.0.txt"
