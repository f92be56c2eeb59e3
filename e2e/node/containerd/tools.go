//go:build tools

// Package tools pins github.com/containerd/containerd/v2 v2.1.4 for the real-GPU node run (e2e/build-node-tools.sh).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
