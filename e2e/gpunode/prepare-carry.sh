#!/usr/bin/env bash
# Pack what the GPU node run carries to the lent machine (docs/verification.md, "On a real GPU: a real kubelet runs
# the program's pods") into build/gpunode-carry/ (ignored; the device tool's `carry`):
#   bin-*.tar.xz  e2e/build-node-tools.sh's binaries in two xz streams (the working tree and the carry share 64 MiB)
#   rootfs/       base.tar.xz: the images' root filesystem from Debian 12 packages (libc6, busybox-static; the
#                 driver's libraries and nvidia-smi come from CDI at run time); python.tar.xz: Python 3.11 from
#                 Debian 12 (python3.11-minimal, its standard library), layered on base for the node-check Job's
#                 image (the program's payloads need Python 3.11 or newer), its tests and tools left out; and pause:
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
# Python for the node-check Job's image: the interpreter, its standard library and the two C libraries the
# interpreter itself links (zlib for the code's zip, expat).
PY_DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib zlib1g libexpat1)
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
mkdir -p "$T/debs" "$T/py-debs" "$T/root" "$T/python"
(cd "$T/debs" && apt-get download "${DEBS[@]}" >/dev/null 2>&1)
(cd "$T/py-debs" && apt-get download "${PY_DEBS[@]}" >/dev/null 2>&1)
for deb in "$T"/debs/*.deb; do dpkg-deb -x "$deb" "$T/root"; basename "$deb" >>"$C/rootfs/packages.txt"; done
for deb in "$T"/py-debs/*.deb; do dpkg-deb -x "$deb" "$T/python"; basename "$deb" >>"$C/rootfs/packages.txt"; done
[[ -x "$T/python/usr/bin/python3.11" ]] || { echo "Python's Debian packages did not unpack" >&2; exit 1; }
ln -s python3.11 "$T/python/usr/bin/python3"
# What node-check never imports, for the carry's 64 MiB: the standard library's tests, IDLE, Tk, documentation
# data, asyncio, multiprocessing, XML, SQLite, curses, the CJK codecs and other encodings (a UTF-8 process needs
# none), the C modules' test builds, locales and docs. A module node-check needs and this drops makes the run's
# node-check Job fail with ModuleNotFoundError in its log, which the recorded tests would show.
PYLIB="$T/python/usr/lib/python3.11"
rm -rf "$PYLIB"/{test,idlelib,tkinter,turtledemo,pydoc_data,ensurepip,lib2to3,unittest/test,__phello__} \
  "$PYLIB"/{asyncio,multiprocessing,xml,sqlite3,curses,distutils,dbm,wsgiref,xmlrpc,concurrent,venv,ctypes/test} \
  "$PYLIB"/lib-dynload/{_test,xx,_ctypes_test,_codecs_,_multibytecodec,_sqlite3,_curses,_dbm,_asyncio}* \
  "$PYLIB"/lib-dynload/{_multiprocessing,_posixshmem,audioop,nis,ossaudiodev,readline,_crypt}* "$T/python/usr/share"
(cd "$PYLIB/encodings" && ls | grep -vE '^(__init__|aliases|ascii|utf_8|utf_8_sig|latin_1|idna|punycode|raw_unicode_escape|unicode_escape|utf_16|utf_32|cp437|charmap|hex_codec|base64_codec)\.py$' | xargs rm -f)
find "$T/python" -name __pycache__ -prune -exec rm -rf {} +
tar --sort=name --owner=0 --group=0 --mtime=@0 -C "$T/python" -cf - . | xz -9e >"$C/rootfs/python.tar.xz"
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
# The node-check Job's image (base + python) imports all of node-check's code here first, not for the first time
# on the GPU machine: a module the pruning above dropped fails the build.
mkdir -p "$T/check" && cp -a "$T/root/." "$T/python/." "$T/check/"
python3 -c 'import base64,json,sys; o=json.load(open(sys.argv[1])); sys.stdout.buffer.write(base64.b64decode(next(iter(o["binaryData"].values()))))' \
  "$C/objects/node-check-code.json" >"$T/check/node-check.pyz"
if [[ "$(id -u)" == 0 ]]; then
  chroot "$T/check" /usr/bin/python3 /node-check.pyz --help >/dev/null || { echo "node-check does not start in its image" >&2; exit 1; }
else
  unshare -r chroot "$T/check" /usr/bin/python3 /node-check.pyz --help >/dev/null || { echo "node-check does not start in its image" >&2; exit 1; }
fi

openssl genrsa -out "$C/pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$C/pki/sa.key" -pubout -out "$C/pki/sa.pub" 2>/dev/null
od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$C/pki/token"

echo "--- $C"
(cd "$BIN" && du -b "${BINARIES[@]}" | awk '{printf "%8.1f MiB  %s\n", $1/1048576, $2}')
(cd "$C" && du -ab bin-kube.tar.xz bin-node.tar.xz rootfs | sort -k2 | awk '{printf "%8.1f MiB  %s\n", $1/1048576, $2}')
du -sb "$C" | awk '{printf "carry: %.1f MiB\n", $1/1048576}'
git -C "$REPO" ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "tracked files: %.1f MiB\n", $1/1048576}'
