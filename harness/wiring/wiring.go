// Package wiring starts the three fakes as one node would have them: cri-fake with a CNI conf dir
// holding the cni-fake → portmap conflist and a bin dir holding the plugin binaries, and csi-fake
// serving the node plugin on one socket and the controller plugin on another, all under one
// directory laid out like a node:
//
//	DIR/run/cri.sock             the CRI endpoint (containerRuntimeEndpoint)
//	DIR/run/csi/csi.sock         the CSI node plugin (the DaemonSet's socket)
//	DIR/run/csi/controller.sock  the CSI controller plugin (the Deployment's socket)
//	DIR/etc/cni/net.d/           CNI configuration (first file in name order wins)
//	DIR/etc/cni/faults.json      cni-fake's fault rules (the conflist's faultsFile; Node.CNIFaults)
//	DIR/opt/cni/bin/             CNI plugin binaries (cni-fake with ExecCNI, portmap with Portmap)
//	DIR/var/log/plugsim/         trace files: cni.jsonl (cni-fake), cri.jsonl, csi.jsonl
//	DIR/var/lib/kubelet/         where the kubelet's staging and target paths go
//	DIR/crictl.yaml              crictl --config DIR/crictl.yaml ps
//
// A unix socket's path is at most 107 bytes (sun_path). When DIR is too long for the longest of
// them (DIR/run/csi/controller.sock: a long $TMPDIR, a long test name in t.TempDir()), DIR/run is
// a symlink to a short directory made under $TMPDIR, or /tmp when $TMPDIR is long too, and the
// endpoints name the sockets there (Node.RunDir); Close removes both.
//
// Start does it in-process for a Go test; the harness command does it for `harness up` and for
// every scenario `harness run` executes. By default cri-fake runs cni-fake's plugin code in its
// own process (cni-fake/inprocess), so a test builds and installs nothing; ExecCNI execs the
// binary instead, as a real runtime does.
package wiring

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/containernetworking/cni/pkg/invoke"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cni-fake/inprocess"
	"github.com/plugsim/plugsim/cni-fake/plugin"
	criserver "github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/csi-fake/driver"
	csiserver "github.com/plugsim/plugsim/csi-fake/server"
	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/fixtures"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/atomicfile"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// Options choose what the node looks like.
type Options struct {
	// Dir holds everything; empty means a temp dir (t.TempDir() in Start).
	Dir string
	// CNI is "default" (the cni-fake conflist), "none" (an empty conf dir: NetworkReady=false, as
	// on a node before its CNI installer ran) or "off" (no CNI at all: cri-fake hands out
	// addresses itself; for load runs that measure the CRI alone).
	CNI string
	// Portmap chains the real portmap plugin after cni-fake, as Calico's conflist does. portmap
	// writes iptables rules in the network namespace the runtime runs in, so only set it when this
	// process runs in a network namespace of its own (the harness command does that as root).
	Portmap bool
	// ExecCNI execs the cni-fake binary for every CNI call, as containerd does (the harness
	// command sets it). Without it cri-fake runs cni-fake's plugin code in its own process: the
	// same calls, results and trace lines, with no binary to build or install and no exec per
	// call. Plugins chained after cni-fake (portmap) are exec'd either way.
	ExecCNI bool
	// BinDir has the cni-fake (with ExecCNI) and portmap (with Portmap) binaries; empty means
	// $PLUGSIM_BIN, then the directory of the running executable, then (in tests, with ExecCNI)
	// cni-fake is built into a temp dir.
	BinDir string
	// RuntimeHandlers accepted by cri-fake (default runc).
	RuntimeHandlers []string
	// CSI configures csi-fake.
	CSI CSIOptions
	// NoCSI leaves csi-fake out.
	NoCSI bool
	// Admin serves each fake's admin API (trace, fault rules) on DIR/run/cri-admin.sock and
	// DIR/run/csi-admin.sock, for other processes (`harness run --dir`, curl).
	Admin bool
	// TraceCapacity bounds the in-memory trace of each fake (0: the default ring; a load run
	// wants a small one).
	TraceCapacity int
	// Fixtures are what the fakes hold when they start: cri-fake its CRI section, csi-fake its
	// CSI section (fixtures.Load reads a fixture file).
	Fixtures *fixtures.Node
}

// CSIOptions configure csi-fake.
type CSIOptions struct {
	DriverName    string // default csi.plugsim.dev
	NodeID        string // default plugsim-node
	EphemeralOnly bool
	NoAttach      bool
}

// sockets are the sockets a node serves, relative to its run directory; the longest decides
// whether DIR/run can hold them (see the package doc).
var sockets = []string{"cri.sock", "cri-admin.sock", "csi-admin.sock", "csi/csi.sock", "csi/controller.sock"}

// Node is a running set of fakes with clients connected to them.
type Node struct {
	Dir string
	// RunDir holds the sockets: DIR/run, or the short directory DIR/run links to when DIR is too
	// long for a socket path (see the package doc).
	RunDir     string
	CNIConfDir string
	CNIBinDir  string
	CNILog     string
	KubeletDir string
	// CNIFaultsFile is the faultsFile the conflist names: cni-fake's fault rules, read at every
	// call (change them with CNIFaults).
	CNIFaultsFile string

	// CRI and CSI are the fakes themselves: their fault rules (Faults), recorded calls
	// (Recorder) and services (CRI.Runtime(), CRI.Images(), CSI.Driver()). CSI is nil with NoCSI.
	CRI *criserver.Server
	CSI *csiserver.Server

	CRIEndpoint           string
	CSIEndpoint           string // the node plugin's socket (serves every service)
	CSIControllerEndpoint string // the controller plugin's socket ("" when ephemeral-only)

	// CRIAdmin and CSIAdmin are the admin sockets ("" without Options.Admin).
	CRIAdmin string
	CSIAdmin string
	// Portmap says whether portmap is chained after cni-fake.
	Portmap bool

	CRIConn           *grpc.ClientConn
	CSIConn           *grpc.ClientConn
	CSIControllerConn *grpc.ClientConn

	// The gRPC clients of the fakes' services, named for the service and ending in Client so that
	// node.RuntimeClient (a client, what the code under test uses) does not read like
	// node.CRI.Runtime() (cri-fake's runtime service itself).
	RuntimeClient    runtimeapi.RuntimeServiceClient
	ImageClient      runtimeapi.ImageServiceClient
	IdentityClient   csi.IdentityClient
	ControllerClient csi.ControllerClient // on the controller plugin's socket
	NodeClient       csi.NodeClient

	opts      Options
	cniExec   invoke.Exec // nil: libcni execs every plugin
	tmp       string
	shortRun  string // the short directory DIR/run links to, or ""
	closeOnce sync.Once
	closeErr  error
}

// Start brings a node up in-process for a test and tears it down with t.Cleanup.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.BinDir == "" && o.CNI != "off" && o.ExecCNI && FindBinDir("") == "" {
		o.BinDir = buildCNIFake(t)
	}
	n, err := StartNode(o)
	if err != nil {
		t.Fatalf("start the fakes: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// buildCNIFake builds the cni-fake plugin into the test's temp dir (the Go build cache makes the
// second build of a test binary nearly free).
func buildCNIFake(t testing.TB) string {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "cni-fake"), "github.com/plugsim/plugsim/cni-fake").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cni-fake (or set PLUGSIM_BIN to a directory holding it): %v\n%s", err, out)
	}
	return dir
}

// FindBinDir finds the directory holding cni-fake: given, $PLUGSIM_BIN, or the running
// executable's directory (bin/harness sits beside bin/cni-fake).
func FindBinDir(given string) string { return findPlugin(given, "cni-fake") }

// findPlugin finds the directory holding a plugin binary, as FindBinDir does.
func findPlugin(given, plugin string) string {
	cands := []string{given, os.Getenv("PLUGSIM_BIN")}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Dir(exe))
	}
	for _, d := range cands {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, plugin)); err == nil && !fi.IsDir() {
			return d
		}
	}
	return ""
}

// StartNode brings a node up in-process; Close tears it down.
func StartNode(o Options) (_ *Node, retErr error) {
	if o.CNI == "" {
		o.CNI = "default"
	}
	n := &Node{opts: o}
	defer func() {
		if retErr != nil {
			n.Close()
		}
	}()
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "plugsim-node-")
		if err != nil {
			return nil, err
		}
		n.tmp, o.Dir = d, d
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	n.Dir = dir
	n.CNIConfDir = filepath.Join(dir, "etc/cni/net.d")
	n.CNIBinDir = filepath.Join(dir, "opt/cni/bin")
	n.CNILog = filepath.Join(dir, "var/log/plugsim/cni.jsonl")
	n.KubeletDir = filepath.Join(dir, "var/lib/kubelet")
	n.CNIFaultsFile = filepath.Join(dir, "etc/cni/faults.json")
	for _, d := range []string{n.CNIConfDir, n.CNIBinDir, filepath.Dir(n.CNILog), n.KubeletDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if n.RunDir, err = n.makeRunDir(); err != nil {
		return nil, err
	}
	if o.CNI != "off" {
		if err := n.installPlugins(o); err != nil {
			return nil, err
		}
	}
	if o.CNI == "default" {
		if err := n.CNIFaults().Reset(); err != nil { // the conflist names it: it must exist
			return nil, err
		}
		if err := atomicfile.Write(filepath.Join(n.CNIConfDir, "10-plugsim.conflist"), Conflist("plugsim", "10.88.0.0/16", n.CNILog, filepath.Join(dir, "var/lib/cni"), n.CNIFaultsFile, o.Portmap), 0o644); err != nil {
			return nil, err
		}
	}

	n.Portmap = o.Portmap && o.CNI == "default"
	if o.Admin {
		n.CRIAdmin = "unix://" + filepath.Join(n.RunDir, "cri-admin.sock")
		if !o.NoCSI {
			n.CSIAdmin = "unix://" + filepath.Join(n.RunDir, "csi-admin.sock")
		}
	}
	n.CRIEndpoint = "unix://" + filepath.Join(n.RunDir, "cri.sock")
	confDir := n.CNIConfDir
	if o.CNI == "off" {
		confDir = ""
	}
	var criFixtures *fixtures.CRI
	var csiFixtures *fixtures.CSI
	if o.Fixtures != nil {
		criFixtures, csiFixtures = &o.Fixtures.CRI, &o.Fixtures.CSI
		if o.NoCSI && !csiFixtures.Empty() {
			return nil, errors.New("the fixtures have a csi section, and NoCSI leaves csi-fake out")
		}
	}
	if !o.ExecCNI {
		n.cniExec = inprocess.New()
	}
	n.CRI, err = criserver.Start(criserver.Options{
		AdminSocket:     n.CRIAdmin,
		TraceCapacity:   o.TraceCapacity,
		Endpoint:        n.CRIEndpoint,
		RootDir:         filepath.Join(dir, "var/lib/cri-fake"),
		CNIConfDir:      confDir,
		CNIBinDirs:      []string{n.CNIBinDir},
		CNIExec:         n.cniExec,
		RuntimeHandlers: o.RuntimeHandlers,
		TraceFile:       filepath.Join(dir, "var/log/plugsim/cri.jsonl"),
		Fixtures:        criFixtures,
	})
	if err != nil {
		return nil, fmt.Errorf("cri-fake: %w", err)
	}
	if n.CRIConn, err = call.Dial(n.CRIEndpoint); err != nil {
		return nil, err
	}
	n.RuntimeClient = runtimeapi.NewRuntimeServiceClient(n.CRIConn)
	n.ImageClient = runtimeapi.NewImageServiceClient(n.CRIConn)

	if !o.NoCSI {
		c := o.CSI
		if c.NodeID == "" {
			c.NodeID = "plugsim-node"
		}
		n.CSIEndpoint = "unix://" + filepath.Join(n.RunDir, "csi/csi.sock")
		var rec *trace.Recorder
		if o.TraceCapacity != 0 {
			if rec, err = trace.New(trace.Options{Capacity: o.TraceCapacity}); err != nil {
				return nil, err
			}
		}
		copts := csiserver.Options{
			Recorder:      rec,
			AdminSocket:   n.CSIAdmin,
			Endpoint:      n.CSIEndpoint,
			DriverName:    c.DriverName,
			NodeID:        c.NodeID,
			Mode:          driver.ModeAll,
			StateDir:      filepath.Join(dir, "var/lib/csi-fake"),
			EphemeralOnly: c.EphemeralOnly,
			NoAttach:      c.NoAttach,
			TraceFile:     filepath.Join(dir, "var/log/plugsim/csi.jsonl"),
			Fixtures:      csiFixtures,
		}
		if !c.EphemeralOnly {
			n.CSIControllerEndpoint = "unix://" + filepath.Join(n.RunDir, "csi/controller.sock")
			copts.ControllerEndpoint = n.CSIControllerEndpoint
		}
		if n.CSI, err = csiserver.Start(copts); err != nil {
			return nil, fmt.Errorf("csi-fake: %w", err)
		}
		if n.CSIConn, err = call.Dial(n.CSIEndpoint); err != nil {
			return nil, err
		}
		n.CSIControllerConn = n.CSIConn
		if n.CSIControllerEndpoint != "" {
			if n.CSIControllerConn, err = call.Dial(n.CSIControllerEndpoint); err != nil {
				return nil, err
			}
		}
		n.IdentityClient = csi.NewIdentityClient(n.CSIConn)
		n.ControllerClient = csi.NewControllerClient(n.CSIControllerConn)
		n.NodeClient = csi.NewNodeClient(n.CSIConn)
	}
	if err := WriteCrictlConfig(filepath.Join(dir, "crictl.yaml"), n.CRIEndpoint); err != nil {
		return nil, err
	}
	return n, nil
}

// makeRunDir makes the directory the sockets go in: DIR/run, or, when the longest socket under it
// would not fit a socket path, a short directory that DIR/run links to.
func (n *Node) makeRunDir() (string, error) {
	run := filepath.Join(n.Dir, "run")
	longest := 0
	for _, s := range sockets {
		longest = max(longest, len(s))
	}
	if len(run)+1+longest <= endpoint.MaxPathLen {
		return run, os.MkdirAll(filepath.Join(run, "csi"), 0o755)
	}
	short, err := endpoint.MkdirTemp("plugsim-run-", longest)
	if err != nil {
		return "", fmt.Errorf("%s is too long for the sockets under it: %w", run, err)
	}
	n.shortRun = short
	if err := os.Mkdir(filepath.Join(short, "csi"), 0o755); err != nil {
		return "", err
	}
	// A link left by an earlier node in DIR, or an empty directory, gives way; anything else is
	// not ours to delete.
	if err := os.Remove(run); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s is too long for a unix socket under it (the limit is %d bytes), and it cannot be replaced by a link to a short directory: %w", run, endpoint.MaxPathLen, err)
	}
	if err := os.Symlink(short, run); err != nil {
		return "", err
	}
	return short, nil
}

// installPlugins links the plugin binaries that are exec'd into the CNI bin dir, the way a CNI
// installer fills /opt/cni/bin.
func (n *Node) installPlugins(o Options) error {
	var plugins []string
	if o.ExecCNI {
		plugins = append(plugins, "cni-fake")
	}
	if o.Portmap {
		plugins = append(plugins, "portmap")
	}
	if len(plugins) == 0 {
		return nil
	}
	src := findPlugin(o.BinDir, plugins[0])
	if src == "" {
		return fmt.Errorf("%s binary not found: run `make build tools` (or set PLUGSIM_BIN to the directory holding it)", plugins[0])
	}
	for _, p := range plugins {
		from := filepath.Join(src, p)
		if _, err := os.Stat(from); err != nil {
			return fmt.Errorf("CNI plugin %s not found in %s: run `make build tools`", p, src)
		}
		to := filepath.Join(n.CNIBinDir, p)
		os.Remove(to)
		if err := os.Symlink(from, to); err != nil {
			return err
		}
	}
	return nil
}

// Conflist is the network configuration the harness installs: cni-fake with its own IPAM,
// logging each invocation to logFile and taking fault rules from faultsFile (when not ""), then
// (withPortmap) portmap for hostPort mappings. It has the shape of Calico's 10-calico.conflist:
// the main plugin, then portmap. portmap's backend is named (iptables), which spares it running
// `iptables --version` on every ADD and DEL to choose one.
func Conflist(name, subnet, logFile, dataDir, faultsFile string, withPortmap bool) []byte {
	portmap := ""
	if withPortmap {
		portmap = `,
    {
      "type": "portmap",
      "backend": "iptables",
      "snat": true,
      "capabilities": { "portMappings": true }
    }`
	}
	faults := ""
	if faultsFile != "" {
		faults = fmt.Sprintf(`
      "faultsFile": %q,`, faultsFile)
	}
	return fmt.Appendf(nil, `{
  "cniVersion": "1.1.0",
  "name": %q,
  "plugins": [
    {
      "type": "cni-fake",
      "mode": "fake",
      "dataDir": %q,
      "logFile": %q,%s
      "capabilities": { "dns": true },
      "ipam": {
        "type": "cni-fake",
        "ranges": [[{ "subnet": %q }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }%s
  ]
}
`, name, dataDir, logFile, faults, subnet, portmap)
}

// WriteCrictlConfig writes a crictl config pointing at the endpoint (0600, replacing whatever is at
// path, a symlink included, without following it).
func WriteCrictlConfig(path, ep string) error {
	return atomicfile.Write(path, fmt.Appendf(nil, "runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 10\ndebug: false\n", ep, ep), 0o600)
}

// Collector follows the three fakes' traces from now on: cri-fake's and csi-fake's recorders and
// cni-fake's log file.
func (n *Node) Collector() *collect.Collector {
	c := &collect.Collector{Sources: []collect.Source{collect.Recorder("cri-fake", n.CRI.Recorder()), collect.File("cni-fake", n.CNILog, false)}}
	if n.CSI != nil {
		c.Sources = append(c.Sources, collect.Recorder("csi-fake", n.CSI.Recorder()))
	}
	return c
}

// Env is a scenario environment on this node.
func (n *Node) Env() *scenario.Env {
	env := &scenario.Env{
		CRI:    n.CRIConn,
		CNI:    &scenario.CNIEnv{ConfDir: n.CNIConfDir, BinDirs: []string{n.CNIBinDir}, CacheDir: filepath.Join(n.Dir, "var/lib/cni/cache"), Exec: n.cniExec},
		Faults: map[string]scenario.FaultTarget{scenario.CRI: FaultSet{n.CRI.Faults()}, scenario.CNI: CNIFaultFile{n.CNIFaults()}},
		Trace:  n.Collector(),
		Vars:   n.Vars(),
	}
	if n.CSI != nil {
		env.CSINode = n.CSIConn
		env.CSIController = n.CSIControllerConn
		env.Faults[scenario.CSI] = FaultSet{n.CSI.Faults()}
	}
	return env
}

// Vars are the variables scenarios can use for this node's paths.
func (n *Node) Vars() map[string]string {
	v := map[string]string{
		"dir": n.Dir, "cniConfDir": n.CNIConfDir, "cniBinDir": n.CNIBinDir, "cniLogFile": n.CNILog,
		"cniDataDir": filepath.Join(n.Dir, "var/lib/cni"), "kubeletDir": n.KubeletDir,
		"criEndpoint": n.CRIEndpoint, "csiEndpoint": n.CSIEndpoint,
	}
	if n.CSI != nil {
		v["driverName"] = n.CSI.Driver().Config().Name
		v["nodeId"] = n.CSI.Driver().Config().NodeID
	}
	return v
}

// Close stops the fakes and closes the connections.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		for _, c := range []*grpc.ClientConn{n.CRIConn, n.CSIConn, n.CSIControllerConn} {
			if c != nil {
				c.Close()
			}
		}
		if n.CRI != nil {
			errs = append(errs, n.CRI.Close())
		}
		if n.CSI != nil {
			errs = append(errs, n.CSI.Close())
		}
		if n.shortRun != "" {
			os.RemoveAll(n.shortRun)
			if to, err := os.Readlink(filepath.Join(n.Dir, "run")); err == nil && to == n.shortRun {
				os.Remove(filepath.Join(n.Dir, "run"))
			}
		}
		if n.tmp != "" {
			os.RemoveAll(n.tmp)
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// CNIFaults are cni-fake's fault rules (in CNIFaultsFile, which the conflist names), with the
// counts cni-fake keeps for them across its calls:
//
//	node.CNIFaults().Add(faults.Rule{Method: "ADD", Code: "11", Message: "no IP addresses available", After: 2, Times: 1})
func (n *Node) CNIFaults() plugin.FaultFile {
	return plugin.FaultFile{Path: n.CNIFaultsFile, DataDir: filepath.Join(n.Dir, "var/lib/cni"), Network: "plugsim"}
}

// CNIFaultFile adapts cni-fake's fault file to scenario.FaultTarget.
type CNIFaultFile struct{ plugin.FaultFile }

// AddFaults adds rules.
func (f CNIFaultFile) AddFaults(r ...faults.Rule) ([]string, error) { return f.Add(r...) }

// ClearFaults removes every rule.
func (f CNIFaultFile) ClearFaults() error { return f.Reset() }

// Faults returns the rules with the counts cni-fake kept for them.
func (f CNIFaultFile) Faults() ([]faults.Rule, error) { return f.Rules() }

// FaultSet adapts an in-process fault set to scenario.FaultTarget.
type FaultSet struct{ *faults.Set }

// AddFaults adds rules.
func (f FaultSet) AddFaults(r ...faults.Rule) ([]string, error) { return f.Add(r...) }

// ClearFaults removes every rule.
func (f FaultSet) ClearFaults() error { f.Reset(); return nil }
