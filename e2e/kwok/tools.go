//go:build tools

// Package tools pins KWOK (`kwok`, the controller that plays the kubelets of the e2e control plane's nodes; its
// Stages are in tests/e2e/kwok_stages.yaml). Built by ../build-cluster.sh.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
