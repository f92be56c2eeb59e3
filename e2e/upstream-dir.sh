# Sourced by the build scripts (not run): where the second tier's upstream sources are, in this order:
#   GPU_POOL_UPSTREAM_DIR, when set (a mirror named on purpose; the Makefile sets it to ../shared/upstream only when
#     .upstream/ was never completed);
#   .upstream/, when `make upstream` completed it against the digests recorded now (its .complete holds the sha256
#     of refdata/digests.json: every file in it was checked against that file before it was installed);
#   ../shared/upstream beside the clone (this build machine's mirror).
# A .upstream/ fetched against other digests is refused, not passed over: the build would take another tree than
# the one the tests were recorded against.
# Usage: REPO_DIR=<repo> source e2e/upstream-dir.sh; then "$UPSTREAM" is the folder (or the script has died).
upstream_dir() {
  if [[ -n "${GPU_POOL_UPSTREAM_DIR:-}" ]]; then
    echo "$GPU_POOL_UPSTREAM_DIR"
    return
  fi
  local fetched="$REPO_DIR/.upstream"
  if [[ -d "$fetched" ]]; then
    local want have=""
    want="$(sha256sum "$REPO_DIR/refdata/digests.json" | cut -d' ' -f1)"
    [[ -f "$fetched/.complete" ]] && have="$(tr -d '[:space:]' <"$fetched/.complete")"
    if [[ "$have" != "$want" ]]; then
      echo "$(basename "$0"): error: $fetched was not completed against refdata/digests.json as it is now: run make upstream (or make upstream UPSTREAM_FROM=<mirror>)." >&2
      return 1
    fi
    echo "$fetched"
    return
  fi
  echo "$REPO_DIR/../shared/upstream"
}
UPSTREAM="$(upstream_dir)" || exit 1
