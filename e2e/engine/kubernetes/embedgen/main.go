// embedgen writes the two files the kubernetes provider embeds, from the provider module's own schema.json and
// terraform-mapping.json, the way upstream's generate.go does: the schema re-serialised through schema.PackageSpec
// with the version stamped, the mapping compacted.
//
// Usage: go run ./embedgen SRC_DIR OUT_DIR VERSION
package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: embedgen SRC_DIR OUT_DIR VERSION")
	}
	src, out, version := os.Args[1], os.Args[2], os.Args[3]

	raw, err := os.ReadFile(filepath.Join(src, "schema.json"))
	if err != nil {
		log.Fatal(err)
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		log.Fatalf("cannot deserialize schema: %v", err)
	}
	spec.Version = version
	versioned, err := json.Marshal(spec)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "schema-embed.json"), versioned, 0o600); err != nil {
		log.Fatal(err)
	}

	raw, err = os.ReadFile(filepath.Join(src, "terraform-mapping.json"))
	if err != nil {
		log.Fatal(err)
	}
	var mapping any
	if err := json.Unmarshal(raw, &mapping); err != nil {
		log.Fatalf("cannot deserialize terraform mapping: %v", err)
	}
	compact, err := json.Marshal(mapping)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), compact, 0o600); err != nil {
		log.Fatal(err)
	}
}
