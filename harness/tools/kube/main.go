// Command kube is one binary holding kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
// v1.37.2, as hyperkube was (kube-proxy, which runs on every node, is bin/kube-proxy: alone it holds
// 40 MiB less): it runs the component named by the name it was called by (a symlink such as
// bin/kubectl) or, failing that, by its first argument (`kube kube-apiserver --etcd-servers=…`). One binary
// links once instead of four times; the packages they share compile once either way.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as cmd/kube-apiserver and cmd/kube-controller-manager import it

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format, as each cmd/ main registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as each cmd/ main loads them
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins, as cmd/kubectl imports them
)

var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := servers[name]; !ok && name != "kubectl" && len(os.Args) > 1 {
		// Called as `kube COMPONENT ARGS…`: drop our own name so the component sees argv as its main would.
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	if name == "kubectl" {
		// As cmd/kubectl: the verbosity is set before the command is built, so klog works while it is built.
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := servers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: kube {kube-apiserver|kube-controller-manager|kube-scheduler|kubectl} [flags]\n"+
			"(or call it through a link of one of those names)\n")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
