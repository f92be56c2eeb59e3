//go:build tools

// Package tools pins github.com/NVIDIA/nvidia-container-toolkit v1.20.0 for the real-GPU node run (e2e/build-node-tools.sh).
package tools

import (
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime-hook"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime.cdi"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime.legacy"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk-installer"
)
