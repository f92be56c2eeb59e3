//go:build tools

// Package tools pins github.com/opencontainers/runc v1.3.1 for the real-GPU node run (e2e/build-node-tools.sh).
package tools

import (
	_ "github.com/opencontainers/runc"
)
