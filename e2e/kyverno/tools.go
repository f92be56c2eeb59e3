//go:build tools

// Package tools pins the Kyverno CLI (kubectl-kyverno, installed as `kyverno`). Built by ../build-tools.sh.
package tools

import _ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
