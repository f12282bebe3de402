// Command harness wires cri-fake, cni-fake and csi-fake together like a node, replays
// kubelet-style call sequences against them (or any CRI runtime and CSI driver), and draws every
// call that crosses an interface boundary. See harness/README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

const usage = `harness: replay kubelet-style call sequences and draw every boundary crossing.

A Kubernetes node is built on three plugin interfaces:

  kubelet ──CRI (gRPC)──▶ container runtime ──CNI (exec)──▶ network plugins (→ portmap)
  kubelet, CSI sidecars ──CSI (gRPC)──▶ storage driver (controller plugin + node plugin)

The harness starts plugsim's fakes of all three (cri-fake, cni-fake, csi-fake) as one node, plays
the kubelet and the CSI sidecars against them, and prints each call as it crosses a boundary:

  kubelet ──CRI──▶ cri-fake  RunPodSandbox 1.2ms
  cri-fake ──CNI ADD──▶ cni-fake → portmap  network=plugsim pod=default/web 3.4ms

Usage:
  harness <command> [flags] [args]

Commands:
  run FILE...        run YAML scenarios; exit 1 if an expectation fails (--junit, --diagram-dir)
  kubelet            drive the kubelet's pod (and PVC) sequences as load: --pods N --concurrency C
  replay TRACE...    turn a recorded trace into a scenario (-o FILE), or replay it (--run)
  trace TRACE...     draw recorded trace files as text, Mermaid (--mermaid) or SVG (--svg)
  up                 start the fakes under one directory and keep them up (--dir DIR, default /var/lib/plugsim/node)
  down               stop what 'harness up' started (--dir DIR)
  ui                 the live boundary view in a browser: --addr 127.0.0.1:PORT --dir DIR | --cluster DIR
  cluster up|down    a whole cluster on the fakes: control plane, N nodes with real kubelets (root)
  cluster restart-kubelet NODE...   restart node kubelets with their edited kubelet.yaml (root)
  methods cri|csi    list the CRI or CSI methods a scenario step can call
  conformance summary JUNIT.xml   sum up a Kubernetes e2e (conformance) run's JUnit report

Examples:
  harness run examples/scenarios/*.yaml
  harness run --diagram-dir out/ --junit out/junit.xml examples/scenarios/01-pod-lifecycle.yaml
  harness kubelet --pods 1000 --concurrency 16
  harness up --ui 127.0.0.1:8088 &   (then open the URL it prints, http://127.0.0.1:8088/#token=...)
  harness up &  crictl --config /var/lib/plugsim/node/crictl.yaml info;  harness down
  harness replay --run /var/lib/plugsim/node/var/log/plugsim/cri.jsonl

'harness <command> --help' explains each command's flags.
`

type command struct {
	run  func(args []string) error
	help string
}

var commands = map[string]command{
	"run":         {cmdRun, "run YAML scenarios"},
	"kubelet":     {cmdKubelet, "kubelet sequences as load"},
	"replay":      {cmdReplay, "trace → scenario, and replay"},
	"trace":       {cmdTrace, "draw trace files"},
	"up":          {cmdUp, "start the fakes"},
	"down":        {cmdDown, "stop the fakes"},
	"methods":     {cmdMethods, "list methods"},
	"cluster":     {cmdCluster, "a whole cluster"},
	"ui":          {cmdUI, "the live view in a browser"},
	"conformance": {cmdConformance, "sum up an e2e run"},
}

// exitError carries an exit code without printing anything more.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Print(usage)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		var names []string
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "harness: unknown command %q (commands: %s; see harness --help)\n", os.Args[1], strings.Join(names, ", "))
		os.Exit(2)
	}
	closeInheritedOnExec()
	err := cmd.run(os.Args[2:])
	var code exitError
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintf(os.Stderr, "harness %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// newFlags returns a flag set whose --help prints the command's description first.
func newFlags(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("harness "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: harness %s %s\n\n%s\nFlags:\n", name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}
