// A stand-in for github.com/pulumi/pulumi-java, which the Go module proxy does not serve (403 in every form).
// pulumi-terraform-bridge v3.133.0 imports it in one place (pkg/tfgen/convert_cli.go) for one function that turns
// HCL examples into Java while generating SDKs. A running provider never calls it, so this module keeps the
// signature and refuses the work.
module github.com/pulumi/pulumi-java

go 1.24

require (
	github.com/hashicorp/hcl/v2 v2.24.0
	github.com/pulumi/pulumi/pkg/v3 v3.246.0
)
