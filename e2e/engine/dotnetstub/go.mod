// A stand-in for github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3, which the Go module proxy does not serve
// (403 for every version and its list). pulumi-kubernetes v4.32.0 imports it in one place, its SDK generator
// (provider/cmd/pulumi-gen-kubernetes/main.go), to write the .NET SDK. The engine build runs that generator only
// for `schema` (the provider's schema.json from the Kubernetes OpenAPI spec), which never reaches .NET, so this
// module keeps the two signatures it links and refuses the work.
module github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3

go 1.24

require github.com/pulumi/pulumi/pkg/v3 v3.245.0
