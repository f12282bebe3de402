package runtime

import (
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// A container whose program only waits (`sleep 3600`, `sleep infinity`, `/pause`:
// process.Dormant) is kept dormant when its start is due: its task records when it started and
// sets one alarm for its end (Simulated.ends), and builds nothing else (no goroutine, file
// system view, process table entry, CPU group or log streams) until something looks at it.
// Then materialise starts the process as if it had run since then (process.Spec.StartedAt). What
// it buys: a node of 30,000 sleeping containers holds 30,000 entries of one alarm.Set rather
// than 30,000 simulated processes with a goroutine each (cri-fake/server's BenchmarkLargeNode;
// TestDormantContainerHoldsNoProcess).
//
// A stats call is answered from the model without starting it (process.Dormancy.Usage): the
// kubelet uses its CRI stats provider for every runtime but CRI-O's (UsingLegacyCadvisorStats,
// pkg/kubelet/cadvisor/util.go), and its eviction manager gathers every container's stats every
// 10 s (evictionMonitoringPeriod, pkg/kubelet/kubelet.go).
// What wakes it: an exec, attach, UpdateContainerResources, a signal other than
// one that ends it (KILL, TERM, INT: process.Dormancy.Signalled, which ends it as its program
// would, without simulating it) — all through materialise.

// dozing is a task's dormancy (under simTask.mu).
type dozing struct {
	may   bool             // the program may be kept dormant (decided at Start)
	how   process.Dormancy // what it does while dormant
	on    bool             // it is dormant now: unstarted stays true, materialise wakes it
	since time.Time        // when it started
	slot  int32            // a finite sleep's end in Simulated.ends (alarm.Set's; 0: none)
	// the previous Usage's CPU time and when it was taken (its rate, as the kernel's Stats)
	statsCPU   time.Duration
	statsAfter time.Duration // since since
}

// dormantUsage answers Usage for a dormant task without starting it (process.Dormancy.Usage);
// false when the task is not dormant.
func (t *simTask) dormantUsage() (task.Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.doze.on {
		return task.Usage{}, false
	}
	now := time.Now()
	mem, cpu := t.doze.how.Usage(t.doze.since, now)
	at := t.doze.since.Add(t.doze.statsAfter)
	var rate uint64
	if el := now.Sub(at); el > 0 && cpu >= t.doze.statsCPU {
		rate = uint64(float64(cpu-t.doze.statsCPU) / el.Seconds())
	}
	t.doze.statsCPU, t.doze.statsAfter = cpu, now.Sub(t.doze.since)
	return task.Usage{MemoryBytes: mem, CPUNanos: uint64(cpu), CPUNanoCores: rate}, true
}

// dormancy tells whether a container's main process may be kept dormant: its program only waits
// (process.Dormant), in a PID namespace of its own (in the pod's or the node's, the other
// processes' ps lists it), without a terminal, a catalog behaviour or a test's SpecHook.
func (l *Simulated) dormancy(ts task.Spec, spec *process.Spec, exe vfs.Executable) (process.Dormancy, bool) {
	if l.SpecHook != nil || ts.Config.GetTty() {
		return process.Dormancy{}, false
	}
	if ns := ts.Config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil && ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		return process.Dormancy{}, false
	}
	var args, env []string
	if spec != nil {
		if spec.Behaviour != (process.Behaviour{}) {
			return process.Dormancy{}, false
		}
		args, env = spec.Args, spec.Env
	} else {
		// execlookup.Quick's path: no catalog behaviour, and the spec is not built.
		c := ts.Image.Config
		args = process.Command(c.Entrypoint, c.Cmd, ts.Config.GetCommand(), ts.Config.GetArgs())
		env = c.Env
		for _, kv := range ts.Config.GetEnvs() {
			env = append(env[:len(env):len(env)], kv.GetKey()+"="+string(kv.GetValue()))
		}
	}
	return process.Dormant(exe, args, env, resources(ts).GetMemoryLimitInBytes())
}

// Settled tells delayedstart.Queue that the start was taken (started or abandoned).
func (t *simTask) Settled() bool { return t.settled.Load() }

// Due is delayedstart.Queue's call when the start is due: a dormant start when the program only
// waits, else the process.
func (t *simTask) Due() {
	t.mu.Lock()
	if t.doze.may && t.unstarted {
		t.doze.on, t.doze.since = true, time.Now()
		if t.doze.how.For != process.Forever {
			t.sim.ends.Add(t, t.doze.since.Add(t.doze.how.For))
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.materialise()
}

// AlarmSlot is where Simulated.ends keeps the end of a finite sleep.
func (t *simTask) AlarmSlot() *int32 { return &t.doze.slot }

// Ring ends a dormant sleep at its end (Simulated.ends), with 0, as the process would have.
func (t *simTask) Ring() {
	t.mu.Lock()
	if !t.doze.on {
		t.mu.Unlock()
		return // woken or killed meanwhile
	}
	t.doze.on = false
	t.unstarted = false
	t.settled.Store(true)
	t.mu.Unlock()
	t.end(task.Exit{Code: 0, At: time.Now()})
	t.setReady()
}

// killDormant ends a dormant task as sig ends its program (process.Dormancy.Signalled), and
// tells whether it did.
func (t *simTask) killDormant(sig syscall.Signal) bool {
	t.mu.Lock()
	if !t.doze.on {
		t.mu.Unlock()
		return false
	}
	code, stderr, ends := t.doze.how.Signalled(sig)
	if !ends {
		t.mu.Unlock()
		return false
	}
	t.wakeLocked()
	t.unstarted = false
	t.settled.Store(true)
	t.mu.Unlock()
	if stderr != "" {
		t.logs.Stream(process.Stderr).Write([]byte(stderr))
	}
	t.end(task.Exit{Code: int32(code), At: time.Now()})
	t.setReady()
	return true
}

// wakeLocked ends the task's dormancy (its timer stopped) and returns when it started (zero when
// it was not dormant); t.mu is held.
func (t *simTask) wakeLocked() time.Time {
	if !t.doze.on {
		return time.Time{}
	}
	t.doze.on = false
	if t.doze.how.For != process.Forever {
		t.sim.ends.Remove(t)
	}
	return t.doze.since
}

// Dormant tells whether the task is dormant now (tests).
func (t *simTask) dormant() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doze.on
}
