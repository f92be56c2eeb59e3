// kube-node: one binary for the Kubernetes programs of the real-GPU node run (docs/verification.md, "On a real GPU:
// a real kubelet runs the program's pods"), dispatching on its name or first argument to each upstream command's
// own cobra command, exactly what each upstream main (k8s.io/kubernetes cmd/<name>/<name>.go at the pin) runs.
// One binary because the device tool carries at most 64 MiB: the Kubernetes libraries are linked once (k3s does
// the same), and each command is still the upstream code at the pin in go.mod. No kubectl, for the same reason: the
// run drives the API with e2e/gpunode/kube.py.
//
//	kube-node kube-apiserver ARGS...   (or a link named kube-apiserver)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // kube-apiserver and kube-controller-manager import it for CronJob time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as each upstream main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics, as each upstream main
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as each upstream main
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kube-node" && len(os.Args) > 1 {
		os.Args = os.Args[1:]
		name = os.Args[0]
	}
	switch name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand()))
	default:
		fmt.Fprintln(os.Stderr, "usage: kube-node kube-apiserver|kube-controller-manager|kube-scheduler|kubelet ARGS...")
		os.Exit(2)
	}
}
