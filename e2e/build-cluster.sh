#!/usr/bin/env bash
# Build the programs that play the e2e tier's cluster (tests/e2e/control_plane.py), pinned, into BIN_DIR:
#   kwok                           <- sigs.k8s.io/kwok                       (e2e/kwok/go.mod)
#   kyverno-admission-controller   <- github.com/kyverno/kyverno/cmd/kyverno (e2e/kyverno/go.mod, with the CLI)
#   kyverno-background-controller  <- github.com/kyverno/kyverno/cmd/background-controller
#   gpu-operator                   <- <upstream>/gpu-operator-src/v26.7.0 (cmd/gpu-operator): its module
#                                     is not served by the Go proxy; every dependency in its go.sum is
#   notebook-controller            <- <upstream>/kubeflow-notebooks/v1.11.0 (components/notebook-controller):
#                                     Kubeflow's notebook controller, likewise not served, its dependencies are
# kube-scheduler and kube-controller-manager come from k8s.io/kubernetes with kube-apiserver (build-tools.sh).
# The go.mod/go.sum files are the lock; versions are read from them, never typed here.
#
# Usage: e2e/build-cluster.sh [BIN_DIR]    (default: $E2E_TOOLS_BIN, else <repo>/.tools/e2e/bin)
# Idempotent like build-tools.sh: a binary is rebuilt only when its stamp changed. The operator's source is
# copied to BIN_DIR/../src/gpu-operator (outside git; the upstream copy is read-only) after its SHA256SUMS check, and
# Kubeflow's to BIN_DIR/../src/notebook-controller after its own.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
BIN_DIR="${1:-${E2E_TOOLS_BIN:-$REPO_DIR/.tools/e2e/bin}}"
# <upstream>: .upstream/ (make upstream), else the mirror (e2e/upstream-dir.sh says the order).
# shellcheck source=e2e/upstream-dir.sh
source "$E2E_DIR/upstream-dir.sh"
OPERATOR_SRC="$UPSTREAM/gpu-operator-src"
NOTEBOOKS_SRC="$UPSTREAM/kubeflow-notebooks"
NOTEBOOKS_VERSION=v1.11.0

# shellcheck source=e2e/build-lib.sh
source "$E2E_DIR/build-lib.sh"

[[ -d "$OPERATOR_SRC" ]] || die "the GPU Operator's source is not at $OPERATOR_SRC (run make upstream, or set GPU_POOL_UPSTREAM_DIR to a mirror)."
# Pinned by its SHA256SUMS: a changed file would build another operator than the one the tests claim to run.
(cd "$OPERATOR_SRC" && sha256sum --quiet -c SHA256SUMS) || die "$OPERATOR_SRC does not match its SHA256SUMS."
[[ -d "$NOTEBOOKS_SRC/$NOTEBOOKS_VERSION" ]] || die "Kubeflow's notebook controller source is not at $NOTEBOOKS_SRC (run make upstream, or set GPU_POOL_UPSTREAM_DIR to a mirror)."
# `make upstream` writes its SHA256SUMS with paths from the folder (./v1.11.0/...); this machine's mirror has them from
# the tag's folder (./components/...): checked from where its paths start, every file either way.
if head -n1 "$NOTEBOOKS_SRC/SHA256SUMS" | grep -q "  \./$NOTEBOOKS_VERSION/"; then
  (cd "$NOTEBOOKS_SRC" && sha256sum --quiet -c SHA256SUMS)
else
  (cd "$NOTEBOOKS_SRC/$NOTEBOOKS_VERSION" && sha256sum --quiet -c ../SHA256SUMS)
fi || die "$NOTEBOOKS_SRC does not match its SHA256SUMS."

mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"
SRC_DIR="$(dirname "$BIN_DIR")/src"
STAMP_DIR="$BIN_DIR/.stamps"
mkdir -p "$STAMP_DIR" "$SRC_DIR"

# The later builds' downloads while KWOK compiles (build-lib.sh, prefetch); the operator's and the notebook
# controller's from their read-only upstream trees (`go mod download` only reads go.mod and go.sum).
prefetch "$E2E_DIR/kyverno" "$OPERATOR_SRC/v26.7.0" "$NOTEBOOKS_SRC/$NOTEBOOKS_VERSION/components/notebook-controller"
trap prefetch_wait EXIT

# --- KWOK: the kubelets (Node heartbeats, pod lifecycle through Stages) -----------------------------------------
KWOK_MOD=sigs.k8s.io/kwok
KWOK_VERSION="$(mod_field "$E2E_DIR/kwok" "$KWOK_MOD" Version)"
# The ldflag of KWOK's hack/releases.sh (its default already says the tag; set so that a bump cannot drift).
kwok_ldflags="-s -w -X $KWOK_MOD/pkg/consts.Version=${KWOK_VERSION#v}"
build kwok "$E2E_DIR/kwok" "$KWOK_MOD/cmd/kwok" "$KWOK_VERSION" "3 min on 2 cores" "$kwok_ldflags" ""

# --- Kyverno's admission and background controllers (same module and flags as the CLI in build-tools.sh) -------
KYVERNO_MOD=github.com/kyverno/kyverno
KYVERNO_VERSION="$(mod_field "$E2E_DIR/kyverno" "$KYVERNO_MOD" Version)"
kyverno_ldflags="-s -w -X $KYVERNO_MOD/pkg/version.BuildVersion=$KYVERNO_VERSION"
build kyverno-admission-controller "$E2E_DIR/kyverno" "$KYVERNO_MOD/cmd/kyverno" "$KYVERNO_VERSION" \
  "4 min after the CLI" "$kyverno_ldflags" ""
build kyverno-background-controller "$E2E_DIR/kyverno" "$KYVERNO_MOD/cmd/background-controller" "$KYVERNO_VERSION" \
  "2 min after the admission controller" "$kyverno_ldflags" ""

# --- the GPU Operator's controller -------------------------------------------------------------------------------
# The tag and commit its README names; the source is stamped by its SHA256SUMS (which covers every file).
OPERATOR_VERSION=v26.7.0
OPERATOR_COMMIT=10ee5b3638b89e11e949412aafa5ba99279c3721
operator_source="$(sha256sum "$OPERATOR_SRC/SHA256SUMS" | cut -d' ' -f1)"
# The ldflags of the operator's Makefile (VERSION and GIT_COMMIT into internal/info).
operator_ldflags="-s -w -X github.com/NVIDIA/gpu-operator/internal/info.version=$OPERATOR_VERSION"
operator_ldflags+=" -X github.com/NVIDIA/gpu-operator/internal/info.gitCommit=$OPERATOR_COMMIT"
if ! up_to_date gpu-operator "$OPERATOR_VERSION" "$operator_source"; then
  staged="$SRC_DIR/gpu-operator"
  rm -rf "$staged" && mkdir -p "$staged"
  cp -R "$OPERATOR_SRC/$OPERATOR_VERSION/." "$staged/"
  chmod -R u+w "$staged"
fi
build gpu-operator "$SRC_DIR/gpu-operator" ./cmd/gpu-operator "$OPERATOR_VERSION" "6 min on 2 cores" \
  "$operator_ldflags" "" "$operator_source"

# --- Kubeflow's notebook controller (the reclaim policy's e2e: it scales a stopped Notebook's StatefulSet to 0) ------
# The tag's commit (refdata/sources.py); the source is stamped by its digests, whatever the SHA256SUMS' path form.
notebooks_source="$(cut -d' ' -f1 "$NOTEBOOKS_SRC/SHA256SUMS" | sort | sha256sum | cut -d' ' -f1)"
if ! up_to_date notebook-controller "$NOTEBOOKS_VERSION" "$notebooks_source"; then
  staged="$SRC_DIR/notebook-controller"
  rm -rf "$staged" && mkdir -p "$staged"
  cp -R "$NOTEBOOKS_SRC/$NOTEBOOKS_VERSION/components/notebook-controller/." "$staged/"
  chmod -R u+w "$staged"
fi
# Its Makefile's `go build -o bin/manager main.go`, nothing stamped in.
build notebook-controller "$SRC_DIR/notebook-controller" . "$NOTEBOOKS_VERSION" "4 min on 2 cores" "-s -w" "" \
  "$notebooks_source"

# --- report what the binaries themselves say ---------------------------------------------------------------------
echo "--- $BIN_DIR"
echo "kwok $("$BIN_DIR/kwok" --version 2>&1 | head -n1)"
echo "kyverno-admission-controller $KYVERNO_VERSION, kyverno-background-controller $KYVERNO_VERSION"
echo "gpu-operator $OPERATOR_VERSION (source $operator_source)"
echo "notebook-controller $NOTEBOOKS_VERSION (source $notebooks_source)"
