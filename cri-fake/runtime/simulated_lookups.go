package runtime

import (
	"strconv"
	"strings"
	"sync"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// lookupCache remembers whether a container's command exists, for the containers whose answer
// depends only on the image, the command, PATH and the working directory (quickLookup). What it
// buys: StartContainer decides "executable file not found" without building the container's file
// system view, and a container stopped before its process starts never builds one
// (BenchmarkProcessSimulationCost in cri-fake/server, simulated against until-stopped).
type lookupCache struct {
	mu sync.Mutex
	m  map[lookupKey]error
}

// lookupKey is what the result of an executable lookup depends on when quickLookup says so.
type lookupKey struct{ image, exe, path, workDir string }

func (c *lookupCache) get(key lookupKey) (err error, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	err, known = c.m[key]
	return err, known
}

func (c *lookupCache) put(key lookupKey, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[lookupKey]error{}
	}
	c.m[key] = err
}

// quickLookup tells whether building a container's process spec can fail: only a user name to
// look up, a host path to find, a catalog behaviour or a localhost seccomp profile to parse can. When none is there (ok),
// the file system view is built only when the process really starts, and whether the command
// exists depends only on what key holds.
func quickLookup(spec task.Spec) (key lookupKey, ok bool) {
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
	key = lookupKey{image: spec.Image.ID, exe: exe, workDir: spec.Config.GetWorkingDir()}
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
