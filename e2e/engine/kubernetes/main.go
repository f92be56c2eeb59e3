// pulumi-resource-kubernetes, built from the provider module at the commit of tag v4.25.0.
// Upstream's own main package cannot be built from the module: it embeds two files that upstream generates and never
// commits. This main is the same four-argument Serve call; build-engine.sh generates the embeds with ./embedgen first.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
