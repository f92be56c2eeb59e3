// Package codegen is the part of pulumi-language-dotnet that pulumi-gen-kubernetes links (see ../go.mod).
package codegen

import (
	"errors"

	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

var errLeftOut = errors.New("gpu-pool's engine build leaves out pulumi-language-dotnet: the .NET SDK cannot be generated")

// LanguageResource carries the fields pulumi-gen-kubernetes reads from the real type.
type LanguageResource struct {
	Name    string
	Package string
	Token   string
}

// LanguageResources has the signature of pulumi-language-dotnet's; generating the schema never calls it.
func LanguageResources(tool string, pkg *schema.Package) (map[string]LanguageResource, error) {
	return nil, errLeftOut
}

// GeneratePackage has the signature of pulumi-language-dotnet's; generating the schema never calls it.
func GeneratePackage(
	tool string, pkg *schema.Package, extraFiles map[string][]byte, localDependencies map[string]string,
) (map[string][]byte, error) {
	return nil, errLeftOut
}
