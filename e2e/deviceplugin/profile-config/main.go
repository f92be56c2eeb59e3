// Command profile-config reads time-slicing profiles with the device plugin's own config loader and prints what
// the plugin (and GPU Feature Discovery, which loads the same file the same way) would use.
//
// Input (stdin): a JSON object, profile name -> the config document, i.e. the `data` of the time-slicing
// ConfigMap. Each document goes to a file and through spec.NewConfig with the file as --config-file, then
// spec.DisableResourceNamingInConfig: exactly what cmd/nvidia-device-plugin's loadConfig and startPlugins (and
// cmd/gpu-feature-discovery's start) do with the file config-manager writes. Output (stdout): a JSON object,
// profile name -> reading, keys sorted:
//
//	loadError        the plugin's own error, when it refuses the document (it then exits; the node advertises 0)
//	ignoredByPlugin  what a strict decode into the plugin's own types refuses (a key the plugin silently drops,
//	                 e.g. flags.renameByDefault): null when every key is one the plugin reads
//	sharingStrategy  none | time-slicing | mps, as the plugin's Sharing.SharingStrategy() says
//	renameByDefault, failRequestsGreaterThanOne   of the active strategy's block
//	resources        of the active strategy: name, rename (after the plugin's renaming rules), replicas,
//	                 devices ("all" or what is selected)
//	migStrategy      flags.migStrategy as loaded (the operator's MIG_STRATEGY env overrides it on a node)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"
)

type resource struct {
	Name     string `json:"name"`
	Rename   string `json:"rename"`
	Replicas int    `json:"replicas"`
	Devices  string `json:"devices"`
}

type reading struct {
	LoadError                  *string    `json:"loadError"`
	IgnoredByPlugin            *string    `json:"ignoredByPlugin"`
	SharingStrategy            string     `json:"sharingStrategy"`
	RenameByDefault            bool       `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool       `json:"failRequestsGreaterThanOne"`
	Resources                  []resource `json:"resources"`
	MigStrategy                string     `json:"migStrategy"`
}

// The flags NewConfig needs: the config file, and mig-strategy with the plugin's default, so an absent
// flags.migStrategy reads as the plugin would (no environment: MIG_STRATEGY is the operator's, per node).
func flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone},
		&cli.StringFlag{Name: "config-file"},
	}
}

func load(path string) (*spec.Config, error) {
	var config *spec.Config
	app := cli.NewApp()
	app.Flags = flags()
	app.Action = func(c *cli.Context) error {
		loaded, err := spec.NewConfig(c, c.App.Flags)
		if err != nil {
			return err
		}
		spec.DisableResourceNamingInConfig(loaded)
		config = loaded
		return nil
	}
	if err := app.Run([]string{"profile-config", "--config-file", path}); err != nil {
		return nil, err
	}
	return config, nil
}

func devices(d spec.ReplicatedDevices) string {
	switch {
	case d.All:
		return "all"
	case d.Count > 0:
		return fmt.Sprintf("count %d", d.Count)
	default:
		return fmt.Sprintf("%v", d.List)
	}
}

func read(dir, name, document string) reading {
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(document), 0o600); err != nil {
		panic(err)
	}
	r := reading{Resources: []resource{}}
	var strict spec.Config
	if err := yaml.UnmarshalStrict([]byte(document), &strict); err != nil {
		text := err.Error()
		r.IgnoredByPlugin = &text
	}
	config, err := load(path)
	if err != nil {
		text := err.Error()
		r.LoadError = &text
		return r
	}
	r.SharingStrategy = string(config.Sharing.SharingStrategy())
	active := config.Sharing.ReplicatedResources()
	r.RenameByDefault = active.RenameByDefault
	r.FailRequestsGreaterThanOne = active.FailRequestsGreaterThanOne
	for _, res := range active.Resources {
		r.Resources = append(r.Resources, resource{string(res.Name), string(res.Rename), res.Replicas, devices(res.Devices)})
	}
	if config.Flags.MigStrategy != nil {
		r.MigStrategy = *config.Flags.MigStrategy
	}
	return r
}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile-config: reading stdin:", err)
		os.Exit(2)
	}
	var profiles map[string]string
	if err := json.Unmarshal(input, &profiles); err != nil {
		fmt.Fprintln(os.Stderr, "profile-config: stdin must be a JSON object of profile name -> document:", err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "profile-config")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	names := make([]string, 0, len(profiles))
	for name := range profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]reading, len(names))
	for _, name := range names {
		out[name] = read(dir, name, profiles[name])
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(out); err != nil {
		panic(err)
	}
}
