package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/plugsim/plugsim/internal/atomicfile"
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
	// Runc is the runc binary the nodes' cri-fakes run program containers with ("" when none):
	// `down` deletes what they left with it (oci.Cleanup).
	Runc string `json:"runc,omitempty"`

	mu sync.Mutex
}

// Process is one process `up` started, with its start time (field 22 of /proc/PID/stat, in clock ticks
// since boot), so `down` never signals a process that reused the pid after ours exited.
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
}

// ReadState reads DIR/cluster.json; a missing file is an error that satisfies errors.Is(err, os.ErrNotExist).
func ReadState(dir string) (*State, error) {
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

// save writes the state through package atomicfile, so a crash never leaves half a file.
func (st *State) save() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(st.Dir, StateFile), append(b, '\n'), 0o644)
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
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')' come field 3 (state) onwards: the start time, field 22, is f[19].
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	if f[0] == "Z" {
		return 0, os.ErrNotExist // a zombie has finished; only its parent's wait is left
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive reports whether the recorded process still runs (same pid and same start time).
func (p Process) alive() bool {
	s, err := procStart(p.PID)
	return err == nil && s == p.Start
}
