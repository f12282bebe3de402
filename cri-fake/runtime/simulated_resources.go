package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// The container's resources reach its simulated process here (simTask): the memory limit bounds the
// files the container writes outside its mounts (they live in cri-fake's memory: process.FSConfig
// MemoryLimit; with no limit, process.DefaultMemoryLimit) and arms its OOM killer; the memory limit,
// cpu shares, quota and period and oom_score_adj are what the container reads in /sys/fs/cgroup and
// /proc/<pid>/oom_score_adj (process.Spec CPU, OOMScoreAdj; Process.UpdateResources).

// resources are the container's Linux resources as last set: UpdateContainerResources', else
// CreateContainer's.
func resources(ts task.Spec) *runtimeapi.LinuxContainerResources {
	if ts.Resources != nil {
		return ts.Resources
	}
	return ts.Config.GetLinux().GetResources()
}

// applyResources gives the process being started the resources known now (the memory limit, the
// CPU quota and period, what its cgroup files show); an Update from then on changes them in place.
func (t *simTask) applyResources(spec *process.Spec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live.fs = spec.FS
	t.live.started = t.res
	spec.MemoryLimit = t.res.GetMemoryLimitInBytes()
	spec.CPUQuota, spec.CPUPeriod = process.CPULimit(t.res)
	spec.CPUShares = t.res.GetCpuShares()
	spec.OOMScoreAdj = t.res.GetOomScoreAdj()
	if spec.FS != nil {
		spec.FS.SetMemoryLimit(spec.MemoryLimit)
	}
}

// Update applies UpdateContainerResources: a new memory limit bounds the container's in-memory
// files from the next write on (what they hold already stays), a new CPU quota throttles its
// processes from the current period on, and the container's cgroup files show the new figures.
func (t *simTask) Update(r *runtimeapi.LinuxContainerResources) {
	t.mu.Lock()
	if t.doze.on {
		// A dormant process is started to take them: its OOM killer decides as before.
		t.res = r
		t.mu.Unlock()
		t.materialise()
		return
	}
	defer t.mu.Unlock()
	t.res = r
	switch {
	case t.live == nil:
	case t.live.proc != nil:
		t.live.proc.UpdateResources(r) // a memory limit below what it holds: the OOM killer; the CPU quota from this period on
	case t.live.fs != nil:
		t.live.fs.SetMemoryLimit(r.GetMemoryLimitInBytes())
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
