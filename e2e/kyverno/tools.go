//go:build tools

// Package tools pins the Kyverno CLI (kubectl-kyverno, installed as `kyverno`, built by ../build-tools.sh) and the
// two controllers the e2e control plane runs out of cluster, built by ../build-cluster.sh: the admission controller
// (cmd/kyverno) and the background controller.
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/background-controller"
	_ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
	_ "github.com/kyverno/kyverno/cmd/kyverno"
)
