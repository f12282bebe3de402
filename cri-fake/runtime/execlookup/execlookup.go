// Package execlookup decides whether a simulated container's command exists without building the
// container's file system view, for cri-fake/runtime's Simulated launcher.
package execlookup

import (
	"strconv"
	"strings"
	"sync"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// Cache remembers whether a container's command exists, for the containers whose answer
// depends only on the image, the command, PATH and the working directory (Quick). What it
// buys: StartContainer decides "executable file not found" without building the container's file
// system view, and a container stopped before its process starts never builds one
// (BenchmarkProcessSimulationCost in cri-fake/server, simulated against until-stopped).
type Cache struct {
	mu sync.Mutex
	m  map[Key]Result
}

// Result is what the command resolved to, or why it could not.
type Result struct {
	Exe vfs.Executable
	Err error
}

// Key is what the result of an executable lookup depends on when Quick says so.
type Key struct{ image, exe, path, workDir string }

func (c *Cache) Get(key Key) (r Result, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, known = c.m[key]
	return r, known
}

func (c *Cache) Put(key Key, r Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[Key]Result{}
	}
	c.m[key] = r
}

// Quick tells whether building a container's process spec can fail: only a user name to
// look up, a host path to find, a catalog behaviour or a localhost seccomp profile to parse can. When none is there (ok),
// the file system view is built only when the process really starts, and whether the command
// exists depends only on what key holds.
func Quick(spec task.Spec) (key Key, ok bool) {
	c := spec.Image.Config
	if c == nil || len(c.Behavior) > 0 || len(spec.Config.GetMounts()) > 0 ||
		spec.Config.GetLinux().GetSecurityContext().GetRunAsUsername() != "" ||
		process.SeccompReadsFile(spec.Config.GetLinux().GetSecurityContext()) {
		return key, false
	}
	if c.User != "" {
		u, g, _ := strings.Cut(c.User, ":")
		if _, err := strconv.Atoi(u); err != nil {
			return key, false
		}
		if _, err := strconv.Atoi(g); g != "" && err != nil {
			return key, false
		}
	}
	exe, ok := process.Executable(c.Entrypoint, c.Cmd, spec.Config.GetCommand(), spec.Config.GetArgs())
	if !ok {
		return key, false
	}
	key = Key{image: spec.Image.ID, exe: exe, workDir: spec.Config.GetWorkingDir()}
	for _, e := range c.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			key.path = v
		}
	}
	for _, kv := range spec.Config.GetEnvs() {
		if kv.GetKey() == "PATH" {
			key.path = string(kv.GetValue())
		}
	}
	if key.workDir == "" {
		key.workDir = c.WorkingDir
	}
	return key, true
}
