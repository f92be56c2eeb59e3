// Package java is the one symbol of pulumi-java that pulumi-terraform-bridge links (see ../../../go.mod).
package java

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
)

// GenerateProgram has the signature of pulumi-java's; a provider serving resources never reaches it.
func GenerateProgram(*pcl.Program) (map[string][]byte, hcl.Diagnostics, error) {
	return nil, nil, errors.New("gpu-pool's engine build leaves out pulumi-java: Java example conversion is unavailable")
}
