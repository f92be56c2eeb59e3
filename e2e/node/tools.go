//go:build tools

// Package tools keeps the upstream commands kube-node dispatches to in this module's graph (go mod tidy).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
