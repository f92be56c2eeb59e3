#!/usr/bin/env bash
# Which Pulumi engine `make e2e` runs (the CLI, its Python language host, the kubernetes, command and proxmoxve
# plugins), at the versions in e2e/engine/versions.env:
#   ENGINE=installed  yours: `pulumi` on PATH at that version, its language host beside it, and the plugins
#                     `pulumi plugin ls` lists at those versions (`pulumi plugin install resource NAME VERSION`)
#   ENGINE=source     built from source by build-engine.sh (needs the pulumi-build sources; what CI runs)
#   ENGINE=auto       (default) yours when all of it is there, else the source build when its sources are there
# Either way the binaries end up in one folder (the source build's, or links to yours), whose path is written to
# TOOLS_DIR/selected for the e2e tier.
#
# Usage: e2e/select-engine.sh [TOOLS_DIR]   (default <repo>/.tools/engine)
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$E2E_DIR/.." && pwd)"
TOOLS_DIR="${1:-$REPO_DIR/.tools/engine}"
mkdir -p "$TOOLS_DIR" && TOOLS_DIR="$(cd "$TOOLS_DIR" && pwd)"
# shellcheck source=e2e/engine/versions.env
source "$E2E_DIR/engine/versions.env"
if [[ -z "${PULUMI_BUILD_DIR:-}" ]]; then
  # .upstream/ after make upstream, else the mirror beside the clone (e2e/upstream-dir.sh).
  # shellcheck source=e2e/upstream-dir.sh
  source "$E2E_DIR/upstream-dir.sh"
  PULUMI_BUILD_DIR="$UPSTREAM/pulumi-build"
fi
export PULUMI_BUILD_DIR
PLUGINS=("kubernetes $KUBERNETES_VERSION" "command $COMMAND_VERSION" "proxmoxve $PROXMOXVE_VERSION")

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }
mkdir -p "$TOOLS_DIR"

# check_installed: fills MISSING with what the installed engine lacks, and FOUND with NAME=PATH for each binary.
MISSING=()
declare -A FOUND=()
check_installed() {
  local pulumi version dir listed name want
  if ! pulumi="$(command -v pulumi)"; then
    MISSING+=("the Pulumi CLI $PULUMI_VERSION is not on PATH (https://www.pulumi.com/docs/install/: the installer takes --version ${PULUMI_VERSION#v})")
    return 1
  fi
  version="$(pulumi version 2>/dev/null || true)"
  if [[ "$version" != "$PULUMI_VERSION" ]]; then
    MISSING+=("\`pulumi version\` says ${version:-nothing} ($pulumi), not $PULUMI_VERSION")
  fi
  FOUND[pulumi]="$pulumi"
  dir="$(dirname "$(readlink -f "$pulumi")")"
  for name in pulumi-language-python pulumi-language-python-exec; do
    if [[ -x "$dir/$name" ]]; then FOUND[$name]="$dir/$name"; else MISSING+=("$name is not beside $pulumi"); fi
  done
  listed="$(PULUMI_SKIP_UPDATE_CHECK=true pulumi plugin ls --json 2>/dev/null || echo '[]')"
  local home="${PULUMI_HOME:-$HOME/.pulumi}"
  for want in "${PLUGINS[@]}"; do
    set -- $want
    if python3 -c 'import json,sys; sys.exit(0 if any(p.get("kind")=="resource" and p.get("name")==sys.argv[1] and p.get("version")==sys.argv[2] for p in json.loads(sys.argv[3] or "[]")) else 1)' "$1" "$2" "$listed" \
      && [[ -x "$home/plugins/resource-$1-v$2/pulumi-resource-$1" ]]; then
      FOUND[pulumi-resource-$1]="$home/plugins/resource-$1-v$2/pulumi-resource-$1"
    else
      MISSING+=("\`pulumi plugin ls\` has no resource plugin $1 $2 (pulumi plugin install resource $1 $2)")
    fi
  done
  ((${#MISSING[@]} == 0))
}

# link_installed: the installed binaries as links in TOOLS_DIR/installed, each stamped with its pinned version.
link_installed() {
  local out="$TOOLS_DIR/installed" name
  rm -rf "$out" && mkdir -p "$out/.stamps"
  for name in "${!FOUND[@]}"; do ln -s "${FOUND[$name]}" "$out/$name"; done
  printf 'version=%s\n' "$PULUMI_VERSION" >"$out/.stamps/pulumi"
  printf 'version=%s\n' "$PULUMI_VERSION" >"$out/.stamps/pulumi-language-python"
  for want in "${PLUGINS[@]}"; do
    set -- $want
    printf 'version=%s\n' "$2" >"$out/.stamps/pulumi-resource-$1"
  done
  echo "using your Pulumi engine: $(pulumi version) at ${FOUND[pulumi]}, plugins $(printf '%s, ' "${PLUGINS[@]}" | sed 's/, $//')"
  echo "$out" >"$TOOLS_DIR/selected"
}

build_source() {
  [[ -d "$PULUMI_BUILD_DIR" ]] || die "ENGINE=source needs the pulumi-build sources at $PULUMI_BUILD_DIR (set PULUMI_BUILD_DIR; docs/engine.md)."
  PULUMI_BUILD_DIR="$PULUMI_BUILD_DIR" bash "$E2E_DIR/build-engine.sh" "$TOOLS_DIR/bin"
  echo "$TOOLS_DIR/bin" >"$TOOLS_DIR/selected"
}

case "${ENGINE:-auto}" in
  source) build_source ;;
  installed)
    check_installed || die "ENGINE=installed, but: $(printf '%s; ' "${MISSING[@]}" | sed 's/; $//'). Or ENGINE=source builds it."
    link_installed ;;
  auto)
    if check_installed; then
      link_installed
    elif [[ -d "$PULUMI_BUILD_DIR" ]]; then
      echo "your Pulumi engine is not the pinned one ($(printf '%s; ' "${MISSING[@]}" | sed 's/; $//')): building it from source"
      build_source
    else
      die "no Pulumi engine at the pinned versions: $(printf '%s; ' "${MISSING[@]}" | sed 's/; $//'); and no pulumi-build sources at $PULUMI_BUILD_DIR for ENGINE=source (docs/engine.md)."
    fi ;;
  *) die "ENGINE=${ENGINE}: expected auto, installed or source." ;;
esac
