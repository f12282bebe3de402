package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/wiring"
)

// target says where scenarios run: on a fresh node per scenario (the default), or on endpoints
// given on the command line or by `harness up --dir`.
type target struct {
	dir                             string
	criEP, csiEP, csiCtrlEP, binDir string
	noPortmap                       bool
	portmapOK                       bool
	portmapWhy                      string
	// inherit are files a re-executed harness gets as fds 3, 4, …, with inheritEnv set (the
	// view's listener, opened in the host's network namespace).
	inherit    []*os.File
	inheritEnv []string
	stdout     io.Writer
}

func (t *target) flags(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&t.dir, "dir", "", "run against the node that 'harness up --dir DIR' started (its endpoints, admin sockets and CNI log)")
	fs.StringVar(&t.criEP, "cri-endpoint", "", "run against this CRI endpoint (any runtime: unix:///run/containerd/containerd.sock) instead of a fresh cri-fake")
	fs.StringVar(&t.csiEP, "csi-endpoint", "", "CSI node plugin endpoint to run against instead of a fresh csi-fake")
	fs.StringVar(&t.csiCtrlEP, "csi-controller-endpoint", "", "CSI controller plugin endpoint (default: --csi-endpoint)")
	fs.StringVar(&t.binDir, "bin-dir", "", "directory holding cni-fake and portmap (default $PLUGSIM_BIN, or beside the harness binary)")
	fs.BoolVar(&t.noPortmap, "no-portmap", false, "leave portmap out of the CNI chain (it is left out anyway when not root)")
}

func (t *target) remote() bool { return t.dir != "" || t.criEP != "" || t.csiEP != "" }

// prepare decides whether portmap can be chained: only as root, in a network namespace of the
// harness's own (see inOwnNetns), with the portmap binary and iptables present. It may re-execute
// the harness; then it returns an exitError carrying the child's exit code.
func (t *target) prepare() error {
	if t.remote() {
		return nil
	}
	switch {
	case t.noPortmap:
		t.portmapWhy = "--no-portmap"
		return nil
	case wiring.FindBinDir(t.binDir) == "":
		return errors.New("cni-fake binary not found: run 'make build' (or give --bin-dir)")
	}
	if _, err := os.Stat(filepath.Join(wiring.FindBinDir(t.binDir), "portmap")); err != nil {
		t.portmapWhy = "no portmap binary beside cni-fake (run `make tools`)"
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.portmapWhy = "iptables is not installed (run `make deps` as root)"
		return nil
	}
	own, err := inOwnNetns(t.inherit, t.inheritEnv)
	if err != nil {
		return err
	}
	if !own {
		t.portmapWhy = "not root: portmap needs a network namespace of its own for its iptables rules"
		return nil
	}
	t.portmapOK = true
	return nil
}

// node starts a fresh node for a scenario (remote: attaches instead). The returned func stops it.
func (t *target) node(sc *scenario.Scenario, dir string) (*scenario.Env, bool, func(), error) {
	if t.remote() {
		st := wiring.State{CRIEndpoint: t.criEP, CSIEndpoint: t.csiEP, CSIControllerEndpoint: t.csiCtrlEP}
		if t.dir != "" {
			s, err := wiring.ReadState(t.dir)
			if err != nil {
				return nil, false, nil, err
			}
			st = *s
		}
		if st.CSIControllerEndpoint == "" {
			st.CSIControllerEndpoint = st.CSIEndpoint
		}
		r, err := wiring.Attach(st)
		if err != nil {
			return nil, false, nil, err
		}
		return r.Env, st.Portmap, r.Close, nil
	}
	o := wiring.Options{
		Dir:             dir,
		CNI:             sc.Setup.CNI,
		ExecCNI:         true, // the binary, as a runtime runs it
		Portmap:         t.portmapOK,
		BinDir:          t.binDir,
		RuntimeHandlers: sc.Setup.RuntimeHandlers,
		CSI: wiring.CSIOptions{
			DriverName:    sc.Setup.CSI.DriverName,
			EphemeralOnly: sc.Setup.CSI.EphemeralOnly,
			NoAttach:      sc.Setup.CSI.AttachRequired != nil && !*sc.Setup.CSI.AttachRequired,
		},
	}
	n, err := wiring.StartNode(o)
	if err != nil {
		return nil, false, nil, err
	}
	return n.Env(), n.Portmap, func() { n.Close() }, nil
}

func cmdRun(args []string) error {
	fs := newFlags("run", "[flags] SCENARIO.yaml...", `Runs each scenario's steps in order against a fresh set of fakes (cri-fake with the cni-fake →
portmap chain, csi-fake with controller and node plugins) set up as its 'setup:' asks, prints every
call that crossed an interface boundary under the step that caused it, and checks each step's
expectations. The first failing step ends its scenario; the message names the file line, the
step and what was expected and what came back. Exit status 1 when any scenario failed.

As root, the harness runs in a network namespace of its own so that portmap's iptables rules stay
there (see harness/README.md).
`)
	var t target
	t.flags(fs)
	junit := fs.String("junit", "", "write JUnit XML here (one testsuite per scenario, one testcase per step)")
	diagramDir := fs.String("diagram-dir", "", "write SCENARIO.svg and SCENARIO.mmd (Mermaid) sequence diagrams here")
	diagramOut := fs.String("diagram", "", "write the SVG diagram of the (single) scenario here")
	quiet := fs.Bool("quiet", false, "print only the steps, not the boundary trace")
	keepGoing := fs.Bool("keep-going", false, "run every step even after one failed")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on each call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		fs.Usage()
		return exitError(2)
	}
	if *diagramOut != "" && len(files) != 1 {
		return errors.New("--diagram takes one scenario; use --diagram-dir for several")
	}
	var scs []*scenario.Scenario
	for _, f := range files {
		sc, err := scenario.ParseFile(f)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
	}
	if err := t.prepare(); err != nil {
		return err
	}
	if !t.remote() && !t.portmapOK {
		fmt.Printf("note: portmap is not in the CNI chain: %s\n\n", t.portmapWhy)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var results []*scenario.Result
	var failed, skipped []string
	for _, sc := range scs {
		env, portmap, closeNode, err := t.node(sc, "")
		if err != nil {
			return fmt.Errorf("%s: %w", sc.File, err)
		}
		if why := unmet(sc, portmap, t.portmapWhy); why != "" {
			closeNode()
			fmt.Printf("▶ %s  (%s)\nSKIP %s: %s\n\n", sc.Name, sc.File, sc.Name, why)
			skipped = append(skipped, sc.File)
			continue
		}
		env.Out, env.Quiet, env.KeepGoing, env.CallTimeout = os.Stdout, *quiet, *keepGoing, *timeout
		res := scenario.Run(ctx, sc, env)
		closeNode()
		results = append(results, res)
		if !res.Passed {
			failed = append(failed, res.Failure)
		}
		if *diagramDir != "" || *diagramOut != "" {
			svg, mmd, err := writeDiagrams(res, *diagramDir, *diagramOut)
			if err != nil {
				return err
			}
			fmt.Printf("  diagram: %s (Mermaid: %s)\n\n", svg, mmd)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if *junit != "" {
		f, err := os.Create(*junit)
		if err != nil {
			return err
		}
		if err := scenario.WriteJUnit(f, results); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("%d scenarios: %d passed, %d failed, %d skipped\n", len(scs), len(results)-len(failed), len(failed), len(skipped))
	for _, f := range failed {
		fmt.Printf("FAIL %s\n", f)
	}
	if len(failed) > 0 {
		return exitError(1)
	}
	return nil
}

// unmet says why a scenario cannot run on this node, or "".
func unmet(sc *scenario.Scenario, portmap bool, why string) string {
	for _, r := range sc.Requires {
		if r == "portmap" && !portmap {
			if why == "" {
				why = "the node's CNI chain has no portmap"
			}
			return "requires portmap in the CNI chain: " + why
		}
	}
	return ""
}

// writeDiagrams writes the scenario's SVG and Mermaid diagrams.
func writeDiagrams(res *scenario.Result, dir, svgPath string) (string, string, error) {
	base := strings.TrimSuffix(filepath.Base(res.Scenario.File), filepath.Ext(res.Scenario.File))
	if svgPath == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", err
		}
		svgPath = filepath.Join(dir, base+".svg")
	}
	mmdPath := strings.TrimSuffix(svgPath, filepath.Ext(svgPath)) + ".mmd"
	verdict := "passed"
	if !res.Passed {
		verdict = "FAILED: " + res.Failure
	}
	calls := 0
	for _, s := range res.Steps {
		calls += len(s.Events)
	}
	sub := fmt.Sprintf("%s · %d steps · %d boundary crossings · %s", res.Scenario.File, len(res.Steps), calls, verdict)
	sections := res.Sections()
	if err := os.WriteFile(svgPath, diagram.SVG(res.Scenario.Name, sub, sections), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(mmdPath, []byte(diagram.Mermaid(res.Scenario.Name, sections)), 0o644); err != nil {
		return "", "", err
	}
	return svgPath, mmdPath, nil
}
