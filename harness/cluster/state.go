package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/plugsim/plugsim/internal/atomicfile"
	"github.com/plugsim/plugsim/internal/hostproc"
	"github.com/plugsim/plugsim/internal/statedir"
)

// StateFile, in the cluster's directory, lists everything `up` made that outlives it: processes, network
// namespaces, the relay port. `up` writes it before each thing is made (a namespace is listed before it
// is created, a process as soon as it has a pid), so `down` finds all of it after `up` crashed.
const StateFile = "cluster.json"

// markerFile says a directory is a cluster's: `up` only ever clears a directory that has it.
const markerFile = ".plugsim-cluster"

// State is what DIR/cluster.json holds.
type State struct {
	Dir    string    `json:"dir"`
	Prefix string    `json:"prefix"` // every network namespace of this cluster is named PREFIX-...
	Netns  []string  `json:"netns"`
	Procs  []Process `json:"processes"`
	Port   int       `json:"port,omitempty"` // the relay's port on the host's 127.0.0.1
	Nodes  []Node    `json:"nodes"`
	// Join is set for a joining machine's directory (`harness cluster join`).
	Join *JoinState `json:"join,omitempty"`
	// Runc is the runc binary the nodes' cri-fakes run program containers with ("" when none):
	// `down` deletes what they left with it (oci.Cleanup).
	Runc string `json:"runc,omitempty"`

	mu sync.Mutex
}

// JoinState is what `down` needs of a joining machine's cluster: the admin kubeconfig (a copy, in the
// directory) with which it deletes the machine's Node objects and its bootstrap token.
type JoinState struct {
	Kubeconfig string `json:"kubeconfig"`
	TokenID    string `json:"tokenID,omitempty"`
}

// Process is one process `up` started, with its start time (field 22 of /proc/PID/stat, in clock ticks
// since boot), so `down` never signals a process that reused the pid after ours exited (Process.ours).
type Process struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Node is one node's name, network namespace, address and pod CIDR.
type Node struct {
	Name    string `json:"name"`
	Netns   string `json:"netns"`
	IP      string `json:"ip"`
	PodCIDR string `json:"podCIDR,omitempty"`
	// Kind is "" for plugsim's nodes (a kubelet on the fakes), KindKubemark or KindKWOK for the nodes
	// `up` starts beside them to compare (--kubemark-nodes, --kwok-nodes).
	Kind string `json:"kind,omitempty"`
}

// The kinds of node `up` starts beside plugsim's.
const (
	KindKubemark = "kubemark"
	KindKWOK     = "kwok"
)

// NodeKindLabel is the label every node `up` starts carries: plugsim, kubemark or kwok, for a node
// selector to pick one kind.
const NodeKindLabel = "plugsim.dev/node-kind"

// JoinedLabel is the label a joining machine's nodes carry besides (`harness cluster join`): its --name.
const JoinedLabel = "plugsim.dev/joined"

// Skip are the subtrees of a cluster's directory that CheckDir does not walk: the pods' own data, which
// belongs to whatever user a container runs as (each node kubelet's pods/ with its volumes, cri-fake's
// pod directories, the volumes and snapshots of the network-attached storage).
var Skip = []string{"nodes/*/kubelet/pods", "nodes/*/cri", "csi/state/volumes", "csi/state/snapshots"}

// CheckDir refuses a cluster directory that another local user made or could change (internal/statedir):
// what `up`, `down` and the live view act on in it must be root's.
func CheckDir(dir string) error { return statedir.Check(dir, Skip...) }

// ReadState reads DIR/cluster.json after CheckDir; a missing file (or directory) is an error that
// satisfies errors.Is(err, os.ErrNotExist).
func ReadState(dir string) (*State, error) {
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return &st, nil
}

// save writes the state through package atomicfile (0600, never through a symlink), so a crash never
// leaves half a file.
func (st *State) save() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(st.Dir, StateFile), append(b, '\n'), 0o600)
}

func (st *State) addNetns(name string) error {
	st.mu.Lock()
	st.Netns = append(st.Netns, name)
	st.mu.Unlock()
	return st.save()
}

func (st *State) addProcess(p Process) error {
	st.mu.Lock()
	st.Procs = append(st.Procs, p)
	st.mu.Unlock()
	return st.save()
}

// procStart returns the start time of a process from /proc/PID/stat, or an error when it is gone.
func procStart(pid int) (uint64, error) { return hostproc.Start(pid) }

// ours reports, as nil, that the recorded process still runs and is the one `up` started for the cluster
// in dir: the same pid and start time, working in dir (startProc starts every process there). A state
// file that names any other process, planted or stale, never gets it signalled.
func (p Process) ours(dir string) error { return hostproc.Verify(p.PID, p.Start, dir) }
