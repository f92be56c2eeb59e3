#!/usr/bin/env bash
# Build the real Pulumi engine and the three providers this program uses, pinned, into BIN_DIR:
#   pulumi, pulumi-language-python  <- github.com/pulumi/pulumi/pkg/v3 + sdk/v3   (e2e/engine/pulumi/go.mod)
#     (the language host's main.go, v3.259.0, from $PULUMI_BUILD_DIR: the proxy does not serve it)
#   pulumi-language-python-exec     <- the shim in the sdk/v3 module, beside the language host
#   pulumi-resource-kubernetes      <- $PULUMI_BUILD_DIR/pulumi-kubernetes (v4.32.0), its schema.json regenerated
#                                      from the Kubernetes OpenAPI specs as upstream does, with the lock
#                                      e2e/engine/kubernetes/go.mod (see its header)
#   pulumi-resource-command         <- $PULUMI_BUILD_DIR/pulumi-command (v1.2.1)
#   pulumi-resource-proxmoxve       <- $PULUMI_BUILD_DIR/pulumi-proxmoxve (v8.3.0), with
#                                      github.com/pulumi/pulumi-java replaced by e2e/engine/javastub (see its go.mod)
# Versions: e2e/engine/versions.env. Every Go dependency comes from the Go module proxy; the go.mod/go.sum files
# are the lock.
#
# Usage: e2e/build-engine.sh [BIN_DIR]     (default: $ENGINE_BIN, else <repo>/.tools/engine/bin)
# PULUMI_BUILD_DIR: the upstream source trees (default: pulumi-build in .upstream/ after make upstream, else in
# ../shared/upstream beside the clone: e2e/upstream-dir.sh).
# Idempotent: a binary is rebuilt only when its stamp (version, lock or source hash, Go version, flags) changed.
# Source trees are copied to BIN_DIR/../src (outside git) because the upstream copies are read-only and the
# builds change their go.mod files.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
ENGINE_DIR="$E2E_DIR/engine"
BIN_DIR="${1:-${ENGINE_BIN:-$REPO_DIR/.tools/engine/bin}}"
if [[ -z "${PULUMI_BUILD_DIR:-}" ]]; then
  # shellcheck source=e2e/upstream-dir.sh
  source "$E2E_DIR/upstream-dir.sh"
  PULUMI_BUILD_DIR="$UPSTREAM/pulumi-build"
fi
PB="$PULUMI_BUILD_DIR"
# shellcheck source=e2e/engine/versions.env
source "$ENGINE_DIR/versions.env"

# shellcheck source=e2e/build-lib.sh
source "$E2E_DIR/build-lib.sh"

[[ -d "$PB" ]] || die "the Pulumi build sources are not at $PB (run make upstream, or set PULUMI_BUILD_DIR; docs/engine.md)."
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

# The two smaller providers staged first (proxmoxve with pulumi-java replaced by the stub, so that its real module is
# never fetched), then every later build's modules downloaded in the background while the CLI compiles
# (build-lib.sh, prefetch): the kubernetes provider's lock, both providers and the Kubernetes modules whose OpenAPI
# specs the kubernetes provider's schema is generated from (the largest downloads of the engine build).
command_src="$(stage command "$PB/pulumi-command/provider")"
proxmoxve_src="$(stage proxmoxve "$PB/pulumi-proxmoxve/provider")"
(cd "$proxmoxve_src" && go mod edit -replace "github.com/pulumi/pulumi-java=$ENGINE_DIR/javastub")
KUBE_VERSION=v1.36.1 # Makefile.upstream KUBE_VERSION at v4.32.0
LEGACY_KUBE_VERSIONS=(v1.17.0 v1.18.0 v1.19.0 v1.20.0 v1.26.0 v1.28.0 v1.30.0 v1.31.0) # generateSchema in main.go
k8s_stamp="$(lock_hash "$ENGINE_DIR/kubernetes")-$(tree_hash "$PB/pulumi-kubernetes/provider" "$ENGINE_DIR/dotnetstub")"
prefetch "$ENGINE_DIR/kubernetes" "$command_src" "$proxmoxve_src"
if ! up_to_date pulumi-resource-kubernetes "$KUBERNETES_VERSION" "$k8s_stamp"; then
  prefetch_module "${LEGACY_KUBE_VERSIONS[@]/#/k8s.io/kubernetes@}" "k8s.io/kubernetes@$KUBE_VERSION"
fi
trap prefetch_wait EXIT

# --- the CLI and the Python language host (one module: they share most compiled packages) ---------------------
PULUMI_MOD=github.com/pulumi/pulumi/pkg/v3
[[ "$(mod_field "$ENGINE_DIR/pulumi" "$PULUMI_MOD" Version)" == "$PULUMI_VERSION" ]] ||
  die "e2e/engine/pulumi/go.mod does not pin $PULUMI_MOD at $PULUMI_VERSION (e2e/engine/versions.env)"
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
# v4.32.0 as upstream's Makefile builds it (pulumi-build/pulumi-kubernetes/Makefile.upstream: k8sgen, schema,
# k8sprovider): build pulumi-gen-kubernetes, generate schema.json from the Kubernetes OpenAPI spec of KUBE_VERSION
# (merged over the older specs its generateSchema reads), `go generate` the two files the provider embeds, build.
# Upstream downloads the specs from GitHub; here they are the api/openapi-spec/swagger.json of the k8s.io/kubernetes
# modules the proxy serves (go mod download checks them against Go's checksum database).
# KUBE_VERSION and LEGACY_KUBE_VERSIONS: above, where their modules' downloads start.
# `git hash-object` of provider/cmd/pulumi-resource-kubernetes/schema.json at tag v4.32.0 (pulumi-build/README.md):
# the regenerated file must be that blob, byte for byte.
K8S_SCHEMA_BLOB=9c927da9e707c7d50af9adc020d66c245cddf94e
K8S_VERSION_PKG=github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version

# git_blob FILE -> the id `git hash-object FILE` prints (sha1 of "blob <size>\0" and the bytes), without git.
git_blob() { { printf 'blob %d\0' "$(stat -c %s "$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1; }

# module_dir_at MODULE@VERSION -> its directory in the module cache (downloaded outside any module).
module_dir_at() {
  local blank="$SRC_DIR/blank" answer
  mkdir -p "$blank"
  answer="$(cd "$blank" && GOFLAGS=-mod=mod go mod download -json "$1")" || die "go mod download $1 failed"
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$answer"
}

# k8s_stamp: above.
if up_to_date pulumi-resource-kubernetes "$KUBERNETES_VERSION" "$k8s_stamp"; then
  echo "up to date: pulumi-resource-kubernetes $KUBERNETES_VERSION"
else
  k8s_root="$SRC_DIR/kubernetes"
  rm -rf "$k8s_root" && mkdir -p "$k8s_root"
  cp -R "$PB/pulumi-kubernetes/provider" "$ENGINE_DIR/dotnetstub" "$k8s_root/"
  chmod -R u+w "$k8s_root"
  cp "$ENGINE_DIR/kubernetes/go.mod" "$ENGINE_DIR/kubernetes/go.sum" "$k8s_root/provider/"
  specs="$k8s_root/provider/pkg/gen/openapi-specs"
  mkdir -p "$specs"
  for kube in "$KUBE_VERSION" "${LEGACY_KUBE_VERSIONS[@]}"; do
    kube_dir="$(module_dir_at "k8s.io/kubernetes@$kube")"
    cp "$kube_dir/api/openapi-spec/swagger.json" "$specs/swagger-$kube.json"
  done
  # The generator is a build tool, not part of the engine: it goes beside the sources, not into BIN_DIR.
  (
    BIN_DIR="$k8s_root/bin" STAMP_DIR="$k8s_root/bin/.stamps"
    mkdir -p "$STAMP_DIR"
    build pulumi-gen-kubernetes "$k8s_root/provider" ./cmd/pulumi-gen-kubernetes "$KUBERNETES_VERSION" \
      "4 min on 2 cores" "-s -w -X $K8S_VERSION_PKG=$KUBERNETES_VERSION" "" "$k8s_stamp"
  )
  echo "generating the kubernetes provider's schema.json from the Kubernetes $KUBE_VERSION OpenAPI spec"
  "$k8s_root/bin/pulumi-gen-kubernetes" schema "$specs/swagger-$KUBE_VERSION.json" "$k8s_root" >/dev/null
  schema="$k8s_root/provider/cmd/pulumi-resource-kubernetes/schema.json"
  [[ "$(git_blob "$schema")" == "$K8S_SCHEMA_BLOB" ]] ||
    die "the regenerated $schema is blob $(git_blob "$schema"), not v$KUBERNETES_VERSION's $K8S_SCHEMA_BLOB"
  echo "schema.json is blob $K8S_SCHEMA_BLOB, byte for byte the v$KUBERNETES_VERSION release's"
  (cd "$k8s_root/provider/cmd/pulumi-resource-kubernetes" && VERSION="$KUBERNETES_VERSION" go run generate.go)
  build pulumi-resource-kubernetes "$k8s_root/provider" ./cmd/pulumi-resource-kubernetes "$KUBERNETES_VERSION" \
    "20 min on 2 cores" "-s -w -X $K8S_VERSION_PKG=$KUBERNETES_VERSION" "" "$k8s_stamp"
fi

# --- pulumi-resource-command ------------------------------------------------------------------------------------
# pulumi-build/README.md: v1.2.1 @ 7f3eb6f3 (staged above)
build pulumi-resource-command "$command_src" ./cmd/pulumi-resource-command "$COMMAND_VERSION" "3.5 min" \
  "-s -w -X github.com/pulumi/pulumi-command/provider/pkg/version.Version=$COMMAND_VERSION" "" \
  "$(tree_hash "$PB/pulumi-command/provider")"

# --- pulumi-resource-proxmoxve ----------------------------------------------------------------------------------
# pulumi-build/README.md: v8.3.0 @ fb7a0201 (staged above)
build pulumi-resource-proxmoxve "$proxmoxve_src" ./cmd/pulumi-resource-proxmoxve "$PROXMOXVE_VERSION" "5 min" \
  "-s -w -X github.com/muhlba91/pulumi-proxmoxve/provider/pkg/version.Version=$PROXMOXVE_VERSION" "" \
  "$(tree_hash "$PB/pulumi-proxmoxve/provider" "$ENGINE_DIR/javastub")"

# --- report what the binaries themselves say ----------------------------------------------------------------------
echo "--- $BIN_DIR"
echo "pulumi $("$BIN_DIR/pulumi" version)"
for p in pulumi-resource-kubernetes pulumi-resource-command pulumi-resource-proxmoxve pulumi-language-python; do
  echo "$p $(cat "$STAMP_DIR/$p" | sed -n 's/^version=//p')"
done
