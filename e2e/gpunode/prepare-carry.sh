#!/usr/bin/env bash
# Pack what the GPU node run carries to the lent machine (docs/verification.md, "On a real GPU: a real kubelet runs
# the program's pods") into build/gpunode-carry/ (ignored; the device tool's `carry`):
#   bin-*.tar.xz  e2e/build-node-tools.sh's binaries in two xz streams (the working tree and the carry share 64 MiB)
#   rootfs/       base.tar.xz: the images' root filesystem from Debian 12 packages (libc6, busybox-static; the
#                 driver's libraries and nvidia-smi come from CDI at run time), and pause:
#                 Kubernetes' own pause.c (k8s.io/kubernetes at the tier's pin, build/pause) compiled statically
#   objects/      the program's objects (python -m tests.gpu_node_recording objects)
#   pki/          a throwaway service-account key and API token for the run's control plane, made fresh each time
# Usage: e2e/gpunode/prepare-carry.sh [BIN_DIR]   (default: <repo>/.tools/node/bin)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${1:-$REPO/.tools/node/bin}"
C="$REPO/build/gpunode-carry"
# C libraries for nvidia-smi and the device plugin (cgo); the CUDA program brings the machine's own (run.sh).
DEBS=(libc6 busybox-static)
BINARIES=(kube-node etcd containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback nvidia-ctk
  nvidia-ctk-installer nvidia-container-runtime nvidia-container-runtime.cdi nvidia-container-runtime.legacy
  nvidia-container-runtime-hook nvidia-cdi-hook nvidia-device-plugin)

rm -rf "$C" && mkdir -p "$C/rootfs" "$C/objects" "$C/pki"
for b in "${BINARIES[@]}"; do
  [[ -x "$BIN/$b" ]] || { echo "missing $BIN/$b: run e2e/build-node-tools.sh first" >&2; exit 1; }
done
# One solid xz stream with a window larger than the whole tar: the Go binaries share their runtime and many
# libraries (the toolkit's seven above all), which a window that spans them all stores once.
# Two streams compressed at once (the Kubernetes side, which shares etcd's client and gRPC, and the node's runtime
# side); each window is larger than its tar.
pack() { # NAME BINARY...
  local name="$1"; shift
  tar --sort=name --owner=0 --group=0 --mtime=@0 -C "$BIN" -cf - "$@" |
    xz -T1 --x86 --lzma2=preset=7,dict=512MiB >"$C/$name" # --x86: the BCJ filter, for x86 machine code
}
# The device plugin goes with Kubernetes: it links client-go and the API types too.
pack bin-kube.tar.xz kube-node etcd nvidia-device-plugin &
pack bin-node.tar.xz "${BINARIES[@]:2:14}" &
wait

T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
(cd "$T" && apt-get download "${DEBS[@]}" >/dev/null 2>&1)
mkdir -p "$T/root"
for deb in "$T"/*.deb; do dpkg-deb -x "$deb" "$T/root"; basename "$deb" >>"$C/rootfs/packages.txt"; done
# Character-set converters and locales: nothing in the images reads them, and the carry is tight.
rm -rf "$T/root/usr/lib/x86_64-linux-gnu/gconv" "$T/root/usr/share"
for app in $("$T/root/bin/busybox" --list); do [[ -e "$T/root/bin/$app" ]] || ln -s busybox "$T/root/bin/$app"; done
mkdir -p "$T/root/etc" "$T/root/tmp" "$T/root/proc" "$T/root/sys" "$T/root/dev" "$T/root/usr/bin"
chmod 1777 "$T/root/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nsmoke:x:1000:1000:smoke:/tmp:/bin/sh\n' >"$T/root/etc/passwd"
printf 'root:x:0:\nsmoke:x:1000:\n' >"$T/root/etc/group"
: >"$T/root/etc/ld.so.conf"
tar --sort=name --owner=0 --group=0 --mtime=@0 -C "$T/root" -cf - . | xz -9e >"$C/rootfs/base.tar.xz"

K8S_DIR="$(cd "$REPO/e2e/node" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
gcc -Os -static -Wall -Werror -DVERSION=v3.10.1-gpu-pool -o "$C/rootfs/pause" "$K8S_DIR/build/pause/linux/pause.c"
strip "$C/rootfs/pause"

(cd "$REPO" && .venv/bin/python -m tests.gpu_node_recording objects "$C/objects")

openssl genrsa -out "$C/pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$C/pki/sa.key" -pubout -out "$C/pki/sa.pub" 2>/dev/null
od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$C/pki/token"

echo "--- $C"
(cd "$BIN" && du -b "${BINARIES[@]}" | awk '{printf "%8.1f MiB  %s\n", $1/1048576, $2}')
(cd "$C" && du -ab bin-kube.tar.xz bin-node.tar.xz rootfs | sort -k2 | awk '{printf "%8.1f MiB  %s\n", $1/1048576, $2}')
du -sb "$C" | awk '{printf "carry: %.1f MiB\n", $1/1048576}'
git -C "$REPO" ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "tracked files: %.1f MiB\n", $1/1048576}'
