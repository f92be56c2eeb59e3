//go:build tools

// Package tools pins NVIDIA's node software for the e2e tier and the H200 run: GPU Feature Discovery and the
// device plugin, from github.com/NVIDIA/k8s-device-plugin. Built by ../build-tools.sh.
package tools

import (
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery"
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
)
