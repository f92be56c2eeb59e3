#!/usr/bin/env bash
# Build the real Pulumi engine and the three providers this program uses, pinned, into BIN_DIR:
#   pulumi, pulumi-language-python  <- github.com/pulumi/pulumi/pkg/v3 + sdk/v3   (e2e/engine/pulumi/go.mod)
#     (the language host's main.go, v3.259.0, from $GPU_POOL_UPSTREAM_DIR/pulumi-build: the proxy does not serve it)
#   pulumi-language-python-exec     <- the shim in the sdk/v3 module, beside the language host
#   pulumi-resource-kubernetes      <- provider/v4 at the commit of tag v4.25.0     (e2e/engine/kubernetes/go.mod)
#   pulumi-resource-command         <- $GPU_POOL_UPSTREAM_DIR/pulumi-build/pulumi-command (v1.2.1)
#   pulumi-resource-proxmoxve       <- $GPU_POOL_UPSTREAM_DIR/pulumi-build/pulumi-proxmoxve (v8.3.0), with
#                                      github.com/pulumi/pulumi-java replaced by e2e/engine/javastub (see its go.mod)
# Every Go dependency comes from the Go module proxy; the go.mod/go.sum files are the lock.
#
# Usage: e2e/build-engine.sh [BIN_DIR]     (default: $ENGINE_BIN, else <repo>/.tools/engine/bin)
# Idempotent: a binary is rebuilt only when its stamp (version, lock or source hash, Go version, flags) changed.
# Source trees are copied to BIN_DIR/../src (outside git) because the upstream copies are read-only and the
# proxmoxve build needs one replace added to its go.mod.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
ENGINE_DIR="$E2E_DIR/engine"
BIN_DIR="${1:-${ENGINE_BIN:-$REPO_DIR/.tools/engine/bin}}"
UPSTREAM="${GPU_POOL_UPSTREAM_DIR:-$REPO_DIR/../shared/upstream}"
PB="$UPSTREAM/pulumi-build"

# shellcheck source=e2e/build-lib.sh
source "$E2E_DIR/build-lib.sh"

[[ -d "$PB" ]] || die "the Pulumi build sources are not at $PB (set GPU_POOL_UPSTREAM_DIR to ../shared/upstream)."
# The upstream trees are pinned by their SHA256SUMS: a changed file would build another provider than the README says.
(cd "$PB" && sha256sum --quiet -c SHA256SUMS) || die "$PB does not match its SHA256SUMS."

mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"
SRC_DIR="$(dirname "$BIN_DIR")/src"
STAMP_DIR="$BIN_DIR/.stamps"
mkdir -p "$STAMP_DIR" "$SRC_DIR"

# tree_hash DIR... -> sha256 over every file's path and content (the stamp of a source tree).
tree_hash() { (for d in "$@"; do (cd "$d" && find . -type f -print0 | sort -z | xargs -0 sha256sum); done) | sha256sum | cut -d' ' -f1; }

# stage NAME FROM... -> a fresh writable copy of the given trees in $SRC_DIR/NAME (printed).
stage() {
  local name="$1"; shift
  local dst="$SRC_DIR/$name"
  rm -rf "$dst" && mkdir -p "$dst"
  local from
  for from in "$@"; do cp -R "$from/." "$dst/"; done
  chmod -R u+w "$dst"
  echo "$dst"
}

# --- the CLI and the Python language host (one module: they share most compiled packages) ---------------------
PULUMI_MOD=github.com/pulumi/pulumi/pkg/v3
PULUMI_VERSION="$(mod_field "$ENGINE_DIR/pulumi" "$PULUMI_MOD" Version)"
LANGHOST_VERSION=v3.259.0 # the tag pulumi-build/pulumi-language-python/main.go was copied at (its README)
pulumi_src="$(stage pulumi "$ENGINE_DIR/pulumi")"
mkdir -p "$pulumi_src/langhost"
cp "$PB/pulumi-language-python/main.go" "$pulumi_src/langhost/main.go"
lock="$(lock_hash "$ENGINE_DIR/pulumi")"
ver_pkg=github.com/pulumi/pulumi/sdk/v3/go/common/version.Version
build pulumi "$pulumi_src" "$PULUMI_MOD/cmd/pulumi" "$PULUMI_VERSION" "13 min on 2 cores" \
  "-s -w -X $ver_pkg=$PULUMI_VERSION" "" "$lock"
build pulumi-language-python "$pulumi_src" ./langhost "$LANGHOST_VERSION" "1 min after pulumi" \
  "-s -w -X $ver_pkg=$LANGHOST_VERSION" "" "$lock-$(tree_hash "$PB/pulumi-language-python")"
# The language host runs Python through this shim, looked up beside its own binary.
SDK_DIR="$(mod_dir "$pulumi_src" github.com/pulumi/pulumi/sdk/v3)"
install -m 0755 "$SDK_DIR/python/cmd/pulumi-language-python-exec" "$BIN_DIR/pulumi-language-python-exec"

# --- pulumi-resource-kubernetes ---------------------------------------------------------------------------------
K8S_MOD=github.com/pulumi/pulumi-kubernetes/provider/v4
K8S_VERSION="$(mod_field "$ENGINE_DIR/kubernetes" github.com/pulumi/pulumi-kubernetes/sdk/v4 Version)"
K8S_VERSION="${K8S_VERSION#v}" # the provider reports 4.25.0, as its releases do
k8s_stamp="$(lock_hash "$ENGINE_DIR/kubernetes")-$(tree_hash "$ENGINE_DIR/kubernetes")"
if ! up_to_date pulumi-resource-kubernetes "$K8S_VERSION" "$k8s_stamp"; then
  k8s_src="$(stage kubernetes "$ENGINE_DIR/kubernetes")"
  K8S_MOD_DIR="$(mod_dir "$k8s_src" "$K8S_MOD")"
  echo "generating the kubernetes provider's embedded schema (upstream generates it and never commits it)"
  (cd "$k8s_src" && go run ./embedgen "$K8S_MOD_DIR/cmd/pulumi-resource-kubernetes" . "$K8S_VERSION")
  build pulumi-resource-kubernetes "$k8s_src" . "$K8S_VERSION" "20 min on 2 cores" \
    "-s -w -X $K8S_MOD/pkg/version.Version=$K8S_VERSION" "" "$k8s_stamp"
fi

# --- pulumi-resource-command ------------------------------------------------------------------------------------
COMMAND_VERSION=1.2.1 # pulumi-build/README.md: v1.2.1 @ 7f3eb6f3
command_src="$(stage command "$PB/pulumi-command/provider")"
build pulumi-resource-command "$command_src" ./cmd/pulumi-resource-command "$COMMAND_VERSION" "3.5 min" \
  "-s -w -X github.com/pulumi/pulumi-command/provider/pkg/version.Version=$COMMAND_VERSION" "" \
  "$(tree_hash "$PB/pulumi-command/provider")"

# --- pulumi-resource-proxmoxve ----------------------------------------------------------------------------------
PROXMOXVE_VERSION=8.3.0 # pulumi-build/README.md: v8.3.0 @ fb7a0201
proxmoxve_src="$(stage proxmoxve "$PB/pulumi-proxmoxve/provider")"
(cd "$proxmoxve_src" && go mod edit -replace "github.com/pulumi/pulumi-java=$ENGINE_DIR/javastub")
build pulumi-resource-proxmoxve "$proxmoxve_src" ./cmd/pulumi-resource-proxmoxve "$PROXMOXVE_VERSION" "5 min" \
  "-s -w -X github.com/muhlba91/pulumi-proxmoxve/provider/pkg/version.Version=$PROXMOXVE_VERSION" "" \
  "$(tree_hash "$PB/pulumi-proxmoxve/provider" "$ENGINE_DIR/javastub")"

# --- report what the binaries themselves say ----------------------------------------------------------------------
echo "--- $BIN_DIR"
echo "pulumi $("$BIN_DIR/pulumi" version)"
for p in pulumi-resource-kubernetes pulumi-resource-command pulumi-resource-proxmoxve pulumi-language-python; do
  echo "$p $(cat "$STAMP_DIR/$p" | sed -n 's/^version=//p')"
done
