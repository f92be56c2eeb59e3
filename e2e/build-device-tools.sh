#!/usr/bin/env bash
# Build NVIDIA's node software and our mini kubelet for the run on a real GPU (docs/verification.md, "On a real
# GPU: the device plugin and GPU Feature Discovery"), pinned in e2e/deviceplugin/go.mod:
#   gpu-feature-discovery, nvidia-device-plugin <- github.com/NVIDIA/k8s-device-plugin cmd/...  (cgo: go-nvml
#                                                  dlopens libnvidia-ml.so.1, so these two link glibc dynamically)
#   mini-kubelet                                <- e2e/deviceplugin/mini-kubelet (static)
# CI never runs them (it has no GPU): the tests replay what they printed (tests/fixtures/deviceplugin/).
#
# Usage: e2e/build-device-tools.sh [BIN_DIR]   (default: $E2E_TOOLS_BIN, else <repo>/.tools/e2e/bin)
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
BIN_DIR="${1:-${E2E_TOOLS_BIN:-$REPO_DIR/.tools/e2e/bin}}"

# shellcheck source=e2e/build-lib.sh
source "$E2E_DIR/build-lib.sh"

mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"
STAMP_DIR="$BIN_DIR/.stamps"
mkdir -p "$STAMP_DIR"

DIR="$E2E_DIR/deviceplugin"
DP_MOD=github.com/NVIDIA/k8s-device-plugin
DP_VERSION="$(mod_field "$DIR" "$DP_MOD" Version)"
# The tag's commit (git rev-parse v0.19.3^{commit} in NVIDIA/k8s-device-plugin): the proxy's .info has none.
declare -A TAG_COMMIT=([v0.19.3]=570e776d6813cb9f3e9c8c105cf8d79989db6650)
# Upstream's Makefile: the version package, and ld told to leave NVML's symbols to the dlopen at run time.
dp_ldflags="-s -w -X $DP_MOD/internal/info.version=$DP_VERSION"
if [[ -n "${TAG_COMMIT[$DP_VERSION]:-}" ]]; then dp_ldflags+=" -X $DP_MOD/internal/info.gitCommit=${TAG_COMMIT[$DP_VERSION]}"; fi
dp_ldflags+=" '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'"

CGO_ENABLED=1 build gpu-feature-discovery "$DIR" "$DP_MOD/cmd/gpu-feature-discovery" "$DP_VERSION" \
  "6 min on 2 cores" "$dp_ldflags" ""
CGO_ENABLED=1 build nvidia-device-plugin "$DIR" "$DP_MOD/cmd/nvidia-device-plugin" "$DP_VERSION" \
  "2 min after gpu-feature-discovery" "$dp_ldflags" ""
# Our own program: its stamp covers its source too, not only the lock.
MK_SOURCE="$(cat "$DIR/go.mod" "$DIR/go.sum" "$DIR"/mini-kubelet/*.go | sha256sum | cut -d' ' -f1)"
build mini-kubelet "$DIR" ./mini-kubelet "$DP_VERSION" "1 min" "-s -w" "" "$MK_SOURCE"

echo "--- $BIN_DIR"
echo "gpu-feature-discovery $("$BIN_DIR/gpu-feature-discovery" --version 2>&1 | head -n1)"
echo "nvidia-device-plugin $("$BIN_DIR/nvidia-device-plugin" --version 2>&1 | head -n1)"
