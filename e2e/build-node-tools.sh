#!/usr/bin/env bash
# Build a whole GPU node's software, for the run on a real GPU (docs/verification.md, "On a real GPU: a real kubelet
# runs the program's pods"), each from its pinned Go module (go.mod + go.sum under e2e/node/ are the lock):
#   kube-node       <- k8s.io/kubernetes at the e2e tier's pin (e2e/node/go.mod = e2e/go.mod's graph plus the kubelet):
#                      kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl in one binary
#                      (e2e/node/kube-node dispatches to each upstream cobra command), so the libraries go once
#   etcd            <- e2e/etcd (the tier's pin)
#   containerd, containerd-shim-runc-v2, ctr <- github.com/containerd/containerd/v2 at the minor the pinned RKE2
#                      release bundles (rancher/rke2 v1.33.5+rke2r1 Dockerfile: hardened-containerd v2.1.4-k3s2)
#   runc            <- github.com/opencontainers/runc (same Dockerfile: hardened-runc v1.3.1), cgo, libseccomp
#                      linked statically (the smoke pod asks for seccomp RuntimeDefault)
#   bridge, host-local, loopback <- github.com/containernetworking/plugins v1.8.0 (the CNI_PLUGIN_VERSION of
#                      the same RKE2 tag)
#   nvidia-ctk, nvidia-ctk-installer, nvidia-container-runtime, nvidia-cdi-hook <- the NVIDIA Container Toolkit
#                      at the gpu-operator chart v26.7.0's toolkit.version (v1.20.0); CDI mode, no libnvidia-container
#   nvidia-device-plugin <- NVIDIA/k8s-device-plugin v0.20.0 (the chart's devicePlugin.version), which the Go
#                      module proxy does not serve: built from the tag's own tree and vendor/ (DP_SRC, below)
# Everything is stripped (-s -w, -trimpath); e2e/deviceplugin/node-carry.sh packs it for the device tool.
#
# Usage: DP_SRC=DIR e2e/build-node-tools.sh [BIN_DIR]      (default BIN_DIR: <repo>/.tools/node/bin)
#   DIR: a checkout of the v0.20.0 tag, e.g.
#   git clone --branch v0.20.0 https://github.com/NVIDIA/k8s-device-plugin DIR
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
BIN_DIR="${1:-$REPO_DIR/.tools/node/bin}"

# shellcheck source=e2e/build-lib.sh
source "$E2E_DIR/build-lib.sh"

mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"
STAMP_DIR="$BIN_DIR/.stamps"
mkdir -p "$STAMP_DIR"
N="$E2E_DIR/node"

# --- Kubernetes: one binary ------------------------------------------------------------------------------------
K8S_VERSION="$(mod_field "$N" k8s.io/kubernetes Version)"
[[ "$K8S_VERSION" == "$(mod_field "$E2E_DIR" k8s.io/kubernetes Version)" ]] ||
  die "e2e/node/go.mod pins k8s.io/kubernetes $K8S_VERSION, the tier e2e/go.mod another: keep them one"
[[ "$K8S_VERSION" =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $K8S_VERSION"
declare -A K8S_COMMIT=([v1.33.5]=03e764d0394bdff662e960c70d25b3c30d731666)
K8S_DATE="$(mod_field "$N" k8s.io/kubernetes 'Time.UTC.Format "2006-01-02T15:04:05Z"')"
k8s_ldflags="-s -w"
for pkgvar in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  k8s_ldflags+=" -X $pkgvar.gitVersion=$K8S_VERSION -X $pkgvar.gitMajor=${BASH_REMATCH[1]}"
  k8s_ldflags+=" -X $pkgvar.gitMinor=${BASH_REMATCH[2]} -X $pkgvar.gitTreeState=clean -X $pkgvar.buildDate=$K8S_DATE"
  if [[ -n "${K8S_COMMIT[$K8S_VERSION]:-}" ]]; then k8s_ldflags+=" -X $pkgvar.gitCommit=${K8S_COMMIT[$K8S_VERSION]}"; fi
done
KN_SOURCE="$(cat "$N/go.mod" "$N/go.sum" "$N"/kube-node/*.go | sha256sum | cut -d' ' -f1)"
# SKIP_KUBE_NODE=1: build the rest only (a second build running beside the long one, on a cold cache).
[[ -n "${SKIP_KUBE_NODE:-}" ]] ||
  build kube-node "$N" ./kube-node "$K8S_VERSION" "25 min on 2 cores" "$k8s_ldflags" "selinux,notest" "$KN_SOURCE"

# --- etcd (the tier's own pin and flags) -------------------------------------------------------------------------
ETCD_VERSION="$(mod_field "$E2E_DIR/etcd" go.etcd.io/etcd/server/v3 Version)"
build etcd "$E2E_DIR/etcd" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "3 min" \
  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=a17edfd" ""

# --- containerd ------------------------------------------------------------------------------------------------
CD_MOD=github.com/containerd/containerd/v2
CD_VERSION="$(mod_field "$N/containerd" "$CD_MOD" Version)"
cd_ldflags="-s -w -X $CD_MOD/version.Version=$CD_VERSION -X $CD_MOD/version.Package=github.com/containerd/containerd/v2"
for c in containerd containerd-shim-runc-v2 ctr; do
  build "$c" "$N/containerd" "$CD_MOD/cmd/$c" "$CD_VERSION" "5 min" "$cd_ldflags" "no_btrfs,no_devmapper,no_zfs"
done

# --- runc: cgo (nsenter) and libseccomp, static as upstream's `make static` -----------------------------------
RUNC_VERSION="$(mod_field "$N/runc" github.com/opencontainers/runc Version)"
[[ -f /usr/lib/x86_64-linux-gnu/libseccomp.a ]] || die "runc needs libseccomp's static library: apt-get install libseccomp-dev"
CGO_ENABLED=1 build runc "$N/runc" github.com/opencontainers/runc "$RUNC_VERSION" "2 min" \
  "-s -w -X main.version=${RUNC_VERSION#v} -extldflags -static" "seccomp,netgo,osusergo,urfave_cli_no_docs"

# --- CNI plugins -------------------------------------------------------------------------------------------------
CNI_MOD=github.com/containernetworking/plugins
CNI_VERSION="$(mod_field "$N/cni" "$CNI_MOD" Version)"
for p in main/bridge ipam/host-local main/loopback; do
  build "${p#*/}" "$N/cni" "$CNI_MOD/plugins/$p" "$CNI_VERSION" "1 min" \
    "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION" ""
done

# --- the NVIDIA Container Toolkit --------------------------------------------------------------------------------
TK_MOD=github.com/NVIDIA/nvidia-container-toolkit
TK_VERSION="$(mod_field "$N/toolkit" "$TK_MOD" Version)"
# The installer (the toolkit container's nvidia-toolkit) installs each runtime of its operator.GetRuntimes() and the
# hook; libnvidia-container and nvidia-container-cli (C, legacy mode only) are not built: CDI mode never runs them.
for c in nvidia-ctk nvidia-ctk-installer nvidia-container-runtime nvidia-container-runtime.cdi \
  nvidia-container-runtime.legacy nvidia-container-runtime-hook nvidia-cdi-hook; do
  # cgo as upstream's Makefile: go-nvml dlopens libnvidia-ml.so.1 (nvidia-ctk cdi generate reads NVML).
  CGO_ENABLED=1 build "$c" "$N/toolkit" "$TK_MOD/cmd/$c" "$TK_VERSION" "3 min" \
    "-s -w -X $TK_MOD/internal/info.version=${TK_VERSION#v} '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy'" ""
done

# --- the device plugin at the chart's version, from its tag ------------------------------------------------------
DP_VERSION=v0.20.0 DP_COMMIT=1b826acc6af3079d8923bac395c3124b8861a9a6
[[ -n "${DP_SRC:-}" && -f "${DP_SRC:-}/cmd/nvidia-device-plugin/main.go" ]] ||
  die "DP_SRC must name a checkout of NVIDIA/k8s-device-plugin $DP_VERSION (git clone --branch $DP_VERSION https://github.com/NVIDIA/k8s-device-plugin DIR)"
DP_SOURCE="$(cd "$DP_SRC" && { cat go.mod go.sum vendor/modules.txt; find cmd internal api -name '*.go' | sort | xargs cat; } | sha256sum | cut -d' ' -f1)"
DP=github.com/NVIDIA/k8s-device-plugin
GOFLAGS="-mod=vendor -buildvcs=false" CGO_ENABLED=1 build nvidia-device-plugin "$DP_SRC" ./cmd/nvidia-device-plugin \
  "$DP_VERSION" "6 min" "-s -w -X $DP/internal/info.version=$DP_VERSION -X $DP/internal/info.gitCommit=$DP_COMMIT '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'" "" "$DP_SOURCE"

echo "--- $BIN_DIR"
(cd "$BIN_DIR" && ls -l --block-size=K -- * | awk '{print $5, $9}')
