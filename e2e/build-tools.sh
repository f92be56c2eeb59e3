#!/usr/bin/env bash
# Build the pinned e2e test servers from Go modules (via the Go module proxy):
#   kube-apiserver, kubectl  <- k8s.io/kubernetes        (e2e/go.mod)
#   kube-scheduler, kube-controller-manager (the e2e control plane; the rest of it: build-cluster.sh)
#   etcd                     <- go.etcd.io/etcd/server/v3 (e2e/etcd/go.mod)
#   helm                     <- helm.sh/helm/v4           (e2e/helm/go.mod)
#   kyverno (the CLI)        <- github.com/kyverno/kyverno (e2e/kyverno/go.mod)
#   profile-config           <- e2e/deviceplugin/profile-config, against github.com/NVIDIA/k8s-device-plugin's
#                               config package (e2e/deviceplugin/go.mod); the node binaries of the same module,
#                               for the GPU run only, come from e2e/build-device-tools.sh
# The go.mod/go.sum files are the lock; versions are read from them, never typed here.
#
# Usage: e2e/build-tools.sh [BIN_DIR]
#   BIN_DIR defaults to $E2E_TOOLS_BIN, else <repo>/.tools/e2e/bin.
# Idempotent: a binary is rebuilt only when its stamp (version, go.mod+go.sum hash,
# Go version, build flags) changed or the binary is missing. Go's module and build
# caches (GOMODCACHE, GOCACHE) are reused as configured in the environment.
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

# Upstream tag commits, for version stamping only (the module proxy's .info for these
# tags carries no commit). Used only while the pinned version matches the key; on a
# version bump add the new tag's commit here or gitCommit is simply left unset.
# helm v4.3.2's commit could not be looked up offline, so helm reports none.
declare -A TAG_COMMIT=(
  [k8s.io/kubernetes@v1.33.5]=03e764d0394bdff662e960c70d25b3c30d731666
  [go.etcd.io/etcd/server/v3@v3.5.21]=a17edfd59754d1aed29c2db33520ab9d401326a5
)

# The other modules' downloads while kube-apiserver compiles (build-lib.sh, prefetch).
prefetch "$E2E_DIR/etcd" "$E2E_DIR/helm" "$E2E_DIR/kyverno" "$E2E_DIR/deviceplugin"
trap prefetch_wait EXIT

# --- Kubernetes (kube-apiserver, kubectl) ------------------------------------------
K8S_MOD=k8s.io/kubernetes
K8S_VERSION="$(mod_field "$E2E_DIR" "$K8S_MOD" Version)"
[[ "$K8S_VERSION" =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected $K8S_MOD version $K8S_VERSION"
K8S_MAJOR="${BASH_REMATCH[1]}" K8S_MINOR="${BASH_REMATCH[2]}"
# buildDate: the tag's publication time from the module proxy (fixed -> reproducible).
K8S_DATE="$(mod_field "$E2E_DIR" "$K8S_MOD" 'Time.UTC.Format "2006-01-02T15:04:05Z"')"
K8S_COMMIT="${TAG_COMMIT[$K8S_MOD@$K8S_VERSION]:-}"
k8s_ldflags="-s -w"
for pkgvar in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  k8s_ldflags+=" -X $pkgvar.gitVersion=$K8S_VERSION -X $pkgvar.gitMajor=$K8S_MAJOR"
  k8s_ldflags+=" -X $pkgvar.gitMinor=$K8S_MINOR -X $pkgvar.gitTreeState=clean"
  k8s_ldflags+=" -X $pkgvar.buildDate=$K8S_DATE"
  if [[ -n "$K8S_COMMIT" ]]; then k8s_ldflags+=" -X $pkgvar.gitCommit=$K8S_COMMIT"; fi
done
K8S_TAGS="selinux,notest" # same build tags as upstream hack/lib/golang.sh

build kube-apiserver "$E2E_DIR" k8s.io/kubernetes/cmd/kube-apiserver "$K8S_VERSION" \
  "8 min on 2 cores" "$k8s_ldflags" "$K8S_TAGS"
build kubectl "$E2E_DIR" k8s.io/kubernetes/cmd/kubectl "$K8S_VERSION" \
  "1 min after kube-apiserver" "$k8s_ldflags" "$K8S_TAGS"
build kube-scheduler "$E2E_DIR" k8s.io/kubernetes/cmd/kube-scheduler "$K8S_VERSION" \
  "1 min after kube-apiserver" "$k8s_ldflags" "$K8S_TAGS"
build kube-controller-manager "$E2E_DIR" k8s.io/kubernetes/cmd/kube-controller-manager "$K8S_VERSION" \
  "2 min after kube-apiserver" "$k8s_ldflags" "$K8S_TAGS"

# --- etcd ---------------------------------------------------------------------------
ETCD_MOD=go.etcd.io/etcd/server/v3
ETCD_VERSION="$(mod_field "$E2E_DIR/etcd" "$ETCD_MOD" Version)"
ETCD_COMMIT="${TAG_COMMIT[$ETCD_MOD@$ETCD_VERSION]:-}"
etcd_ldflags="-s -w"
if [[ -n "$ETCD_COMMIT" ]]; then # etcd's own build stamps the short SHA
  etcd_ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_COMMIT:0:7}"
fi
build etcd "$E2E_DIR/etcd" "$ETCD_MOD" "$ETCD_VERSION" "45 s" "$etcd_ldflags" ""

# --- helm ---------------------------------------------------------------------------
HELM_MOD=helm.sh/helm/v4
HELM_VERSION="$(mod_field "$E2E_DIR/helm" "$HELM_MOD" Version)"
HELM_COMMIT="${TAG_COMMIT[$HELM_MOD@$HELM_VERSION]:-}"
helm_ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
helm_ldflags+=" -X helm.sh/helm/v4/internal/version.metadata="
helm_ldflags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
if [[ -n "$HELM_COMMIT" ]]; then
  helm_ldflags+=" -X helm.sh/helm/v4/internal/version.gitCommit=$HELM_COMMIT"
fi
build helm "$E2E_DIR/helm" helm.sh/helm/v4/cmd/helm "$HELM_VERSION" "3.5 min" "$helm_ldflags" ""

# --- kyverno (the CLI: `kyverno apply` / `kyverno test`, the real policy engine) ----------
KYVERNO_MOD=github.com/kyverno/kyverno
KYVERNO_VERSION="$(mod_field "$E2E_DIR/kyverno" "$KYVERNO_MOD" Version)"
# The ldflags of Kyverno's Makefile (LD_FLAGS, with VERSION set to the tag as its CI does), so `kyverno version`
# says the pinned tag. Its commit and time come from Go's VCS build info, which a module build does not have.
kyverno_ldflags="-s -w -X $KYVERNO_MOD/pkg/version.BuildVersion=$KYVERNO_VERSION"
build kyverno "$E2E_DIR/kyverno" "$KYVERNO_MOD/cmd/cli/kubectl-kyverno" "$KYVERNO_VERSION" \
  "7 min on 2 cores" "$kyverno_ldflags" ""

# --- profile-config: the device plugin's own config loader over the program's time-slicing profiles ---------
DP_MOD=github.com/NVIDIA/k8s-device-plugin
DP_VERSION="$(mod_field "$E2E_DIR/deviceplugin" "$DP_MOD" Version)"
# Our own program: its stamp covers its source too, not only the lock.
PC_SOURCE="$(cat "$E2E_DIR/deviceplugin/go.mod" "$E2E_DIR/deviceplugin/go.sum" "$E2E_DIR"/deviceplugin/profile-config/*.go | sha256sum | cut -d' ' -f1)"
build profile-config "$E2E_DIR/deviceplugin" ./profile-config "$DP_VERSION" "1 min" "-s -w" "" "$PC_SOURCE"

# --- report what the binaries themselves say ---------------------------------------
echo "--- $BIN_DIR"
echo "kube-apiserver $("$BIN_DIR/kube-apiserver" --version | awk '{print $2}')"
echo "kube-scheduler $("$BIN_DIR/kube-scheduler" --version | awk '{print $2}')"
echo "kube-controller-manager $("$BIN_DIR/kube-controller-manager" --version | awk '{print $2}')"
echo "kubectl $("$BIN_DIR/kubectl" version --client -o json | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n1)"
echo "etcd v$("$BIN_DIR/etcd" --version | awk '/^etcd Version:/{print $3}')"
echo "helm $("$BIN_DIR/helm" version --template '{{.Version}}')"
echo "kyverno $("$BIN_DIR/kyverno" version | awk '/^Version:/{print $2}')"
echo "profile-config (k8s-device-plugin $DP_VERSION config package) $(echo '{}' | "$BIN_DIR/profile-config")"
