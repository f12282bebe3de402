package wiring

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/internal/atomicfile"
	"github.com/plugsim/plugsim/internal/hostproc"
	"github.com/plugsim/plugsim/internal/statedir"
)

// StateFile is where `harness up` describes the running node, for `harness down` and for
// `harness run --dir`.
const StateFile = "harness.json"

// StateSkip are the subtrees of a node's directory that PrepareDir and ReadState do not walk: the
// pods' own data (the volumes a kubelet run with --root-dir DIR/var/lib/kubelet makes for them, and
// cri-fake's root directory with the pods' logs, network namespaces and, with real containers, their
// file systems), which belongs to whatever user a container runs as.
var StateSkip = []string{"var/lib/kubelet/pods", "var/lib/cri-fake"}

// PrepareDir makes a node's directory for `harness up` (0700 when new) and refuses one another local
// user made or could change (see internal/statedir).
func PrepareDir(dir string) error { return statedir.Prepare(dir, StateSkip...) }

// State describes a node brought up by `harness up`.
type State struct {
	PID int `json:"pid"`
	// Start is the process's start time (clock ticks since boot, /proc/PID/stat): with the process's
	// working directory, which `harness up` sets to Dir, it tells `harness down` that the pid is
	// still the node's (Running).
	Start                 uint64            `json:"start"`
	Dir                   string            `json:"dir"`
	CRIEndpoint           string            `json:"criEndpoint"`
	CSIEndpoint           string            `json:"csiEndpoint,omitempty"`
	CSIControllerEndpoint string            `json:"csiControllerEndpoint,omitempty"`
	CRIAdmin              string            `json:"criAdmin,omitempty"`
	CSIAdmin              string            `json:"csiAdmin,omitempty"`
	CNIConfDir            string            `json:"cniConfDir"`
	CNIBinDir             string            `json:"cniBinDir"`
	CNILog                string            `json:"cniLog"`
	Portmap               bool              `json:"portmap"`
	Vars                  map[string]string `json:"vars"`
}

// State returns the description of this node, served by this process.
func (n *Node) State() State {
	pid, start, _ := hostproc.Self()
	return State{
		PID: pid, Start: start, Dir: n.Dir,
		CRIEndpoint: n.CRIEndpoint, CSIEndpoint: n.CSIEndpoint, CSIControllerEndpoint: n.CSIControllerEndpoint,
		CRIAdmin: n.CRIAdmin, CSIAdmin: n.CSIAdmin,
		CNIConfDir: n.CNIConfDir, CNIBinDir: n.CNIBinDir, CNILog: n.CNILog, Portmap: n.Portmap,
		Vars: n.Vars(),
	}
}

// WriteState writes DIR/harness.json (0600, replacing whatever is there, a symlink included, without
// following it).
func (n *Node) WriteState() error {
	b, err := json.MarshalIndent(n.State(), "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(n.Dir, StateFile), append(b, '\n'), 0o600)
}

// ReadState reads DIR/harness.json, after checking that no other local user could have written it
// (internal/statedir: the directory, the way to it and everything in it owned by root or by this
// user, and writable by nobody else): the endpoints and the pid it names are acted on.
func ReadState(dir string) (*State, error) {
	if err := statedir.Check(dir, StateSkip...); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no node is up in %s (start one with `harness up --dir %s`): %w", dir, dir, err)
		}
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, fmt.Errorf("no node is up in %s (start one with `harness up --dir %s`): %w", dir, dir, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

// Running reports, as nil, that the process the state names is still the node `harness up --dir
// dir` serves: the same pid and start time, working in dir. Otherwise the error says why not; it
// satisfies errors.Is(err, os.ErrNotExist) when that process is gone.
func (s *State) Running(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return hostproc.Verify(s.PID, s.Start, abs)
}

// Remote is a scenario environment on endpoints this process did not start: a node from
// `harness up`, or any CRI runtime and CSI driver.
type Remote struct {
	Env   *scenario.Env
	conns []*grpc.ClientConn
}

// Close closes the connections.
func (r *Remote) Close() {
	for _, c := range r.conns {
		c.Close()
	}
}

// Attach connects to the endpoints in s. Traces come from the admin sockets and the CNI log when
// there are any; otherwise the harness draws the calls it makes itself.
func Attach(s State) (*Remote, error) {
	r := &Remote{Env: &scenario.Env{Vars: map[string]string{}, Faults: map[string]scenario.FaultTarget{}}}
	for k, v := range s.Vars {
		r.Env.Vars[k] = v
	}
	dial := func(ep string) (*grpc.ClientConn, error) {
		if ep == "" {
			return nil, nil
		}
		c, err := call.Dial(ep)
		if err == nil {
			r.conns = append(r.conns, c)
		}
		return c, err
	}
	var err error
	var cri, csiNode, csiCtrl *grpc.ClientConn
	if cri, err = dial(s.CRIEndpoint); err != nil {
		return nil, err
	}
	if cri != nil {
		r.Env.CRI = cri
	}
	if csiNode, err = dial(s.CSIEndpoint); err != nil {
		return nil, err
	}
	if csiNode != nil {
		r.Env.CSINode, r.Env.CSIController = csiNode, csiNode
	}
	if csiCtrl, err = dial(s.CSIControllerEndpoint); err != nil {
		return nil, err
	}
	if csiCtrl != nil {
		r.Env.CSIController = csiCtrl
	}
	if s.CNIConfDir != "" {
		r.Env.CNI = &scenario.CNIEnv{ConfDir: s.CNIConfDir, BinDirs: []string{s.CNIBinDir}, CacheDir: filepath.Join(s.Dir, "var/lib/cni/cache")}
		// cni-fake's rules are a file the conflist names: any process can change them.
		if n := (&Node{Dir: s.Dir, CNIFaultsFile: filepath.Join(s.Dir, "etc/cni/faults.json")}); fileExists(n.CNIFaultsFile) {
			r.Env.Faults[scenario.CNI] = CNIFaultFile{n.CNIFaults()}
		}
	}
	var sources []collect.Source
	for _, a := range []struct{ name, ep, target string }{{"cri-fake", s.CRIAdmin, scenario.CRI}, {"csi-fake", s.CSIAdmin, scenario.CSI}} {
		if a.ep == "" {
			continue
		}
		src, err := collect.Admin(a.name, a.ep)
		if err != nil {
			return nil, err
		}
		sources = append(sources, src)
		c, err := admin.NewClient(a.ep)
		if err != nil {
			return nil, err
		}
		r.Env.Faults[a.target] = c
	}
	if s.CNILog != "" {
		sources = append(sources, collect.File("cni-fake", s.CNILog, false))
	}
	if len(sources) > 0 {
		r.Env.Trace = &collect.Collector{Sources: sources}
	}
	return r, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
