#!/bin/sh
# The GPU Operator v26.7.0 device plugin entrypoint (assets/state-device-plugin/0400_configmap.yaml, data entrypoint.sh),
# as the operator mounts it at /bin/entrypoint.sh; e2e/gpunode/run.sh creates the ConfigMap from this file.

until [ -f /run/nvidia/validations/driver-ready ]
do
  echo "waiting for the driver validations to be ready..."
  sleep 5
done

set -o allexport
cat /run/nvidia/validations/driver-ready
. /run/nvidia/validations/driver-ready

extra_modules="gdrdrv nvidia_fs"
> feature-flags.env
for module in ${extra_modules}; do
    if lsmod | grep -q "^$module "; then
        case "$module" in
            "gdrdrv")
              if [ -z "$GDRCOPY_ENABLED" ]; then
                  echo "GDRCOPY_ENABLED=true" >> feature-flags.env
              fi
            ;;
            "nvidia_fs")
              if [ -z "$GDS_ENABLED" ]; then
                  echo "GDS_ENABLED=true" >> feature-flags.env
              fi
              if [ -z "$MOFED_ENABLED" ]; then
                  echo "MOFED_ENABLED=true" >> feature-flags.env
              fi
            ;;
        esac
    fi
done

if [ -s "feature-flags.env" ]; then
    echo "Enabling nvidia-device-plugin feature flags..."
    cat feature-flags.env
    . ./feature-flags.env
fi

echo "Starting nvidia-device-plugin"
exec nvidia-device-plugin
