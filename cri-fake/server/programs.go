package server

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/oci"
	"github.com/plugsim/plugsim/cri-fake/runtime"
	"github.com/plugsim/plugsim/harness/trace"
)

// newLauncher is the options' launcher; with a runc binary, the program launcher (cri-fake/oci)
// over the process simulation, so program images run under runc and the rest is simulated.
func (s *Server) newLauncher(opts Options, info map[string]any, logf func(string, ...any)) (runtime.Launcher, error) {
	if opts.Runc == "" {
		return opts.Launcher, nil
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("--runc needs root (runc creates namespaces, mounts and cgroups)")
	}
	fallback := opts.Launcher
	if fallback == nil {
		sim := runtime.NewSimulated()
		sim.Logf = logf
		fallback = sim
	}
	sum := sha256.Sum256([]byte(opts.RootDir))
	l, err := oci.New(oci.Options{
		Runc:         opts.Runc,
		ProgramDir:   programDir(opts),
		StateDir:     filepath.Join(opts.RootDir, "oci"),
		CgroupParent: cmp.Or(opts.CgroupParent, "plugsim-cri-fake-"+hex.EncodeToString(sum[:4])),
		Handlers:     opts.ProgramHandlers,
		Fallback:     fallback,
		Observe:      s.observeOCI,
		Logf:         logf,
	})
	if err != nil {
		return nil, err
	}
	info["programs"] = map[string]any{"runc": opts.Runc, "programDir": programDir(opts),
		"handlers": l.Handlers(), "cgroups": l.CgroupDirs()}
	return l, nil
}

// observeOCI records each runc call cri-fake makes as an event of the OCI interface
// (cri-fake → runc), the boundary containerd's shim crosses to the low-level runtime.
func (s *Server) observeOCI(c oci.Call) {
	ev := trace.Event{
		Time:       c.Start,
		Interface:  trace.OCI,
		Caller:     "cri-fake",
		Callee:     "runc",
		Service:    "runc",
		Method:     c.Method,
		Code:       "OK",
		DurationNS: int64(c.Took),
		Attrs:      map[string]string{"args": strings.Join(c.Args, " ")},
	}
	if c.ContainerID != "" {
		ev.Attrs["containerID"] = c.ContainerID
	}
	if c.Err != nil {
		ev.Code, ev.Error = "ERROR", c.Err.Error()
		var re *oci.Error
		if errors.As(c.Err, &re) && re.Status >= 0 {
			ev.Attrs["exitStatus"] = strconv.Itoa(re.Status)
		}
	}
	req, resp := c.Request, c.Response
	args := c.Args
	ev.SetRenderer(func(e *trace.Event) {
		e.Request, _ = json.Marshal(map[string]any{"args": args, "input": req})
		if resp != nil {
			e.Response, _ = json.Marshal(resp)
		}
	})
	s.serving.Recorder().Record(ev)
}

// programDir is the options' program directory: the "programs" directory beside runc by default
// (`make programs` builds bin/programs beside bin/runc).
func programDir(opts Options) string {
	return cmp.Or(opts.ProgramDir, filepath.Join(filepath.Dir(opts.Runc), "programs"))
}
