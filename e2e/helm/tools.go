//go:build tools

// Package tools pins helm v4. Built by ../build-tools.sh.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
