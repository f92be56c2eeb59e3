#!/bin/sh
# The smoke image's entrypoint (the smoke Job sets no command): what the container was given, the card through
# the driver's own nvidia-smi (CDI mounts it and the driver's libraries), the CUDA program, then hold the slot for
# SMOKE_HOLD_SECONDS so that four Jobs hold the card's four slots at once while the fifth is seen waiting.
echo "uid=$(id -u) gid=$(id -g) seccomp=$(grep '^Seccomp:' /proc/self/status | tr -d '\t')"
echo "devices: $(ls /dev | grep nvidia | tr '\n' ' ')"
nvidia-smi -L
nvidia-smi --query-gpu=uuid,name,driver_version,pci.bus_id --format=csv,noheader
rc=$?
if [ -x /opt/vectoradd/vectorAdd ]; then
  # Its C libraries come with it (built on the GPU machine, whose glibc is not the image's); libcuda from CDI.
  /opt/vectoradd/lib/ld-linux-x86-64.so.2 --library-path /opt/vectoradd/lib:/usr/local/nvidia/lib64 /opt/vectoradd/vectorAdd
  rc=$((rc + $?))
fi
echo "holding the slot for ${SMOKE_HOLD_SECONDS:-0} s"
sleep "${SMOKE_HOLD_SECONDS:-0}"
echo "exit $rc"
exit $rc
