#!/usr/bin/env bash
# Build the pinned e2e test servers from Go modules (via the Go module proxy):
#   kube-apiserver, kubectl  <- k8s.io/kubernetes        (e2e/go.mod)
#   etcd                     <- go.etcd.io/etcd/server/v3 (e2e/etcd/go.mod)
#   helm                     <- helm.sh/helm/v4           (e2e/helm/go.mod)
#   kyverno (the CLI)        <- github.com/kyverno/kyverno (e2e/kyverno/go.mod)
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

die() { echo "build-tools.sh: error: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "'go' not found on PATH. Install Go >= 1.26 (helm v4 requires it) and re-run."
GO_VERSION="$(go env GOVERSION)"
# helm v4.3 declares 'go 1.26.0'; never let go silently download another toolchain.
case "$GO_VERSION" in
  go1.2[6-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
  *) die "Go >= 1.26 required (found $GO_VERSION)." ;;
esac

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

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

# mod_field DIR MODULE FIELD -> e.g. Version / Time of the pinned module.
mod_field() { (cd "$1" && go list -m -f "{{.$3}}" "$2"); }

# lock_hash DIR -> sha256 of the module's go.mod + go.sum (the lock).
lock_hash() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -d' ' -f1; }

# heartbeat NAME: go build prints nothing until it is done (minutes when cold), so say it is still at work.
# Its sleep is killed with it and never holds stdout, so a piped `make` does not wait for it.
heartbeat() {
  local start=$SECONDS
  trap 'kill "$!" 2>/dev/null; exit 0' TERM
  while true; do
    sleep 30 >/dev/null 2>&1 &
    wait "$!"
    echo "  still building $1 ($((SECONDS - start)) s)"
  done
}

# build NAME MODDIR PKG VERSION COLD_HINT LDFLAGS TAGS
build() {
  local name="$1" dir="$2" pkg="$3" version="$4" hint="$5" ldflags="$6" tags="$7"
  local out="$BIN_DIR/$name" stamp_file="$STAMP_DIR/$name"
  local stamp
  stamp="$(printf '%s\n' "name=$name" "pkg=$pkg" "version=$version" \
    "lock=$(lock_hash "$dir")" "go=$GO_VERSION" "ldflags=$ldflags" "tags=$tags")"
  if [[ -x "$out" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
    echo "up to date: $name $version"
    return 0
  fi
  echo "building $name $version (cold build takes ~$hint)..."
  local start=$SECONDS rc=0
  rm -f "$stamp_file"
  heartbeat "$name" &
  local beat=$!
  (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp" "$pkg") || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  ((rc == 0)) || die "go build of $name failed (exit $rc)"
  mv -f "$out.tmp" "$out"
  printf '%s\n' "$stamp" >"$stamp_file"
  echo "built $name in $((SECONDS - start))s"
}

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

# --- report what the binaries themselves say ---------------------------------------
echo "--- $BIN_DIR"
echo "kube-apiserver $("$BIN_DIR/kube-apiserver" --version | awk '{print $2}')"
echo "kubectl $("$BIN_DIR/kubectl" version --client -o json | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n1)"
echo "etcd v$("$BIN_DIR/etcd" --version | awk '/^etcd Version:/{print $3}')"
echo "helm $("$BIN_DIR/helm" version --template '{{.Version}}')"
echo "kyverno $("$BIN_DIR/kyverno" version | awk '/^Version:/{print $2}')"
