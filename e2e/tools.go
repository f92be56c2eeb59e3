//go:build tools

// Package tools pins the Kubernetes binaries the e2e tier builds from source.
// Nothing imports it; `go build` of the listed main packages uses go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
