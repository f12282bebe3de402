package process

import (
	"math"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/applets"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// Dormancy is what a container's main process does when all it does is wait: `sleep N`,
// `sleep infinity`, `/pause`, the program of most pods a scale test runs. Such a process prints
// nothing, reads nothing, holds no file and listens on nothing until it ends or is signalled, so
// a runtime may keep it dormant: record when it started and not simulate it (no goroutine, file
// system view or process table entry) until something looks at it (an exec, attach, a stats
// call that needs more than Usage, a signal it handles, new resources). Then it starts the process with Spec.StartedAt set
// to that start, and the process is what it would have been had it run all along: its start
// time and CPU time count from then and a sleep waits only for the rest
// (cri-fake/runtime's simulated tasks do this).
type Dormancy struct {
	// For is how long it waits before it exits with 0; Forever: until it is signalled.
	For time.Duration
	// handles is the program's handler of the stop signals (pause's), nil for none (sleep).
	handles func(sig syscall.Signal) (line string, ok bool)
	// memory is what it holds (kernel.IdleMemory of its argv and environment), worked out once:
	// a dormant process keeps this, not its argv and environment.
	memory uint64
}

// Usage is what the process's Stats would report had it run since then until now: its memory
// and its CPU time (kernel.IdleMemory, IdleCPU), so a stats call need not start it. Its file system view is
// not built, so the files a started one's view writes (/etc/hosts, hostname, resolv.conf: about
// 1.3 KB) and its HOSTNAME variable are not counted: the started process reports that much more.
func (d Dormancy) Usage(since, now time.Time) (memory uint64, cpu time.Duration) {
	return d.memory, kernel.IdleCPU(now.Sub(since))
}

// Signalled is what sig does to the dormant process, so a runtime may end it without starting
// it: ends, with code, after stderr is written to its standard error. KILL ends any with 137;
// TERM and INT end a sleep with 128+sig (it has no handler) and a pause with 0 and its handler's
// line. For any other signal ends is false: the process must be started to be given it.
func (d Dormancy) Signalled(sig syscall.Signal) (code int, stderr string, ends bool) {
	switch {
	case sig == syscall.SIGKILL:
		return 128 + int(sig), "", true
	case sig != syscall.SIGTERM && sig != syscall.SIGINT:
		return 0, "", false
	case d.handles == nil:
		return 128 + int(sig), "", true
	}
	line, ok := d.handles(sig)
	return 0, line, ok
}

// Forever is Dormancy.For of a process that waits until it is signalled.
const Forever = time.Duration(math.MaxInt64)

// dormantMemory is the least memory limit under which Dormant still answers: a waiting process
// holds 640 KiB in Stats, and its argv and environment are charged to the limit at its start,
// which may OOM-kill it there (kernel.checkMemoryAtStart); below this floor plus twice those
// bytes the process is started, so the OOM killer decides as before.
const dormantMemory = 4 << 20

// Dormant tells whether a container's main process may be kept dormant, and how: exe is what
// args[0] resolves to in its file system (LookupExecutable), env its environment, memoryLimit
// its memory_limit_in_bytes (0: none). A TTY, a catalog behaviour or a PID namespace shared with
// other processes (where ps would list it) are the runtime's to rule out; Dormant knows only the
// program.
func Dormant(exe vfs.Executable, args, env []string, memoryLimit int64) (Dormancy, bool) {
	if len(exe.Script) > 0 || len(args) == 0 {
		return Dormancy{}, false
	}
	if memoryLimit != 0 {
		need := int64(dormantMemory)
		for _, s := range append(args[:len(args):len(args)], env...) {
			need += 2 * int64(len(s)+16)
		}
		if memoryLimit < need {
			return Dormancy{}, false
		}
	}
	switch exe.Applet {
	case "sleep":
		d, ok := applets.SleepDuration(args)
		if !ok {
			return Dormancy{}, false // its usage error, printed when it runs
		}
		return Dormancy{For: d, memory: kernel.IdleMemory(args, env)}, true
	case "pause":
		return Dormancy{For: Forever, handles: libbb.PauseHandles, memory: kernel.IdleMemory(args, env)}, true
	}
	return Dormancy{}, false
}

// LookupExecutable is Lookup with what args[0] resolves to (kernel.LookupExecutable).
func LookupExecutable(fsys *FS, args, env []string, workingDir string) (vfs.Executable, error) {
	return kernel.LookupExecutable(fsys, args, env, workingDir)
}
