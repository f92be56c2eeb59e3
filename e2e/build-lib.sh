# Shared by build-tools.sh and build-engine.sh (sourced, not run): pinned, stamped, idempotent `go build`s.
# The caller sets BIN_DIR and STAMP_DIR before calling `build`.

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "'go' not found on PATH. Install Go >= 1.26 (helm v4 requires it) and re-run."
GO_VERSION="$(go env GOVERSION)"
# helm v4.3 and the Pulumi providers declare 'go 1.26.0'; never let go silently download another toolchain.
case "$GO_VERSION" in
  go1.2[6-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
  *) die "Go >= 1.26 required (found $GO_VERSION)." ;;
esac

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

# mod_field DIR MODULE FIELD -> e.g. Version / Time of the pinned module.
mod_field() { (cd "$1" && go list -m -f "{{.$3}}" "$2"); }

# mod_dir DIR MODULE -> the pinned module's directory in the module cache. `go list -m` names it only once the
# module is downloaded, so download it first (on a cold cache the directory was empty).
mod_dir() { (cd "$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2"); }

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

# stamp_of NAME PKG VERSION LDFLAGS TAGS SOURCE -> what a binary was built from.
stamp_of() {
  printf '%s\n' "name=$1" "pkg=$2" "version=$3" "lock=$6" "go=$GO_VERSION" "ldflags=$4" "tags=$5"
}

# up_to_date NAME VERSION SOURCE: true when the binary exists and was built from this version and source
# (for steps that must run before `build`, like generating embeds).
up_to_date() {
  local stamp_file="$STAMP_DIR/$1"
  [[ -x "$BIN_DIR/$1" && -f "$stamp_file" ]] || return 1
  grep -qx "version=$2" "$stamp_file" && grep -qx "lock=$3" "$stamp_file"
}

# build NAME MODDIR PKG VERSION COLD_HINT LDFLAGS TAGS [SOURCE]
# SOURCE is what identifies the sources (default: MODDIR's go.mod + go.sum hash).
build() {
  local name="$1" dir="$2" pkg="$3" version="$4" hint="$5" ldflags="$6" tags="$7" source="${8:-}"
  [[ -n "$source" ]] || source="$(lock_hash "$dir")"
  local out="$BIN_DIR/$name" stamp_file="$STAMP_DIR/$name"
  local stamp
  stamp="$(stamp_of "$name" "$pkg" "$version" "$ldflags" "$tags" "$source")"
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

# prefetch DIR... / prefetch_module MODULE@VERSION...: download, in the background, the modules of the builds still to
# come (each DIR's go.mod and go.sum, or one module outside any), so that on a cold machine those downloads (GBs:
# docs/engine.md, "What each binary costs cold") run while the build at hand compiles instead of one after the other.
# Go's module cache locks each module while it is fetched: a `go build` that needs one still being downloaded waits
# for it, and the cache is shared by every build here. A failed download is not reported here: the build that needs
# the module fetches it again and fails with go's own message. Warm, each is a local check of the cache.
PREFETCHING=()
prefetch() {
  local dir
  for dir in "$@"; do
    (cd "$dir" && go mod download >/dev/null 2>&1) &
    PREFETCHING+=("$!")
  done
}
prefetch_module() {
  local blank
  blank="$(mktemp -d)"
  (cd "$blank" && GOFLAGS=-mod=mod go mod download "$@" >/dev/null 2>&1; rm -rf "$blank") &
  PREFETCHING+=("$!")
}
# prefetch_wait: before the script ends, so that no download outlives it.
prefetch_wait() {
  local pid
  for pid in "${PREFETCHING[@]}"; do wait "$pid" || true; done
  PREFETCHING=()
}
