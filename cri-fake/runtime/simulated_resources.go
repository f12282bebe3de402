package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// The container's memory limit reaches its simulated process here (simTask): the files the container
// writes outside its mounts live in cri-fake's memory and are bounded by it (process.FSConfig
// MemoryLimit; with no limit, process.DefaultMemoryLimit).

// memoryLimit is the container's memory limit as last set (0: none).
func memoryLimit(ts task.Spec) int64 {
	if ts.Resources != nil {
		return ts.Resources.GetMemoryLimitInBytes()
	}
	return ts.Config.GetLinux().GetResources().GetMemoryLimitInBytes()
}

// applyMemoryLimit gives the process being started the limit known now (its OOM killer and the
// bound of its files); an Update from then on changes it in place.
func (t *simTask) applyMemoryLimit(spec *process.Spec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fs = spec.FS
	spec.MemoryLimit = t.memLimit
	if spec.FS != nil {
		spec.FS.SetMemoryLimit(t.memLimit)
	}
}

// Update applies UpdateContainerResources: a new memory limit bounds the container's in-memory
// files from the next write on (what they hold already stays); a new CPU quota throttles its
// processes from the current period on.
func (t *simTask) Update(r *runtimeapi.LinuxContainerResources) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.memLimit = r.GetMemoryLimitInBytes()
	t.cpuRes = r
	if t.proc != nil {
		t.proc.SetCPULimit(process.CPULimit(r)) // cpu_quota per cpu_period, from this period on
	}
	switch {
	case t.proc != nil:
		t.proc.SetMemoryLimit(t.memLimit) // below what it holds: the OOM killer
	case t.fs != nil:
		t.fs.SetMemoryLimit(t.memLimit)
	}
}

// exitReason is containerd's reason for a process the OOM killer ended ("OOMKilled", its
// exit code 137); "" leaves the runtime's Completed/Error.
func exitReason(p *process.Process) string {
	if p.OOMKilled() {
		return "OOMKilled"
	}
	return ""
}
