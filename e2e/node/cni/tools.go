//go:build tools

// Package tools pins github.com/containernetworking/plugins v1.8.0 for the real-GPU node run (e2e/build-node-tools.sh).
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
