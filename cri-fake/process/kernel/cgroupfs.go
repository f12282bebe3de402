package kernel

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process/cgroupv2"
)

// A container's /sys: sysfs with its cgroup v2 tree at /sys/fs/cgroup, as runc mounts them for a
// container with a private cgroup namespace on a cgroup v2 node (the container's own cgroup is the
// root it sees). The files show the resources the CRI gave the container (CreateContainer's, then
// each UpdateContainerResources': Process.UpdateResources) in the kernel's cgroup v2 formats, as
// runc writes them: the kubelet's in-place resize is checked by reading them
// (test/e2e/common/node/framework/cgroups of k8s.io/kubernetes). The simulation enforces the
// memory limit (memory.go), pids.max (task.go) and the CPU quota (cpu.go); cpu.weight is shown.

// cpuResources is a container's cpu controller as the CRI sets it.
type cpuResources struct {
	Shares int64 // cpu_shares (cgroup v1's unit, 2 to 262144; 0: unset)
	Quota  int64 // cpu_quota in µs per period (0 or less: no limit)
	Period int64 // cpu_period in µs (0: the kernel's 100000)
}

// cpuFromCRI is the cpu part of CRI resources.
func cpuFromCRI(r *runtimeapi.LinuxContainerResources) cpuResources {
	return cpuResources{Shares: r.GetCpuShares(), Quota: r.GetCpuQuota(), Period: r.GetCpuPeriod()}
}

// cgroupState is what of the container's cgroup can change while it runs (UpdateContainerResources).
type cgroupState struct {
	mu          sync.Mutex
	cpu         cpuResources
	oomScoreAdj int64
}

// UpdateResources applies UpdateContainerResources: the memory limit (SetMemoryLimit: the OOM killer
// and the bound of the container's files), the CPU quota (SetCPULimit, from the current period on),
// and the cpu controller and oom_score_adj, which the container
// reads in /sys/fs/cgroup and /proc/<pid>/oom_score_adj from then on. containerd replaces the whole
// Linux resources, so a field the update leaves unset is unset.
func (p *Process) UpdateResources(r *runtimeapi.LinuxContainerResources) {
	c := p.c
	c.cg.mu.Lock()
	c.cg.cpu = cpuFromCRI(r)
	c.cg.oomScoreAdj = r.GetOomScoreAdj()
	c.cg.mu.Unlock()
	p.SetCPULimit(CPULimit(r))
	p.SetMemoryLimit(r.GetMemoryLimitInBytes())
}

// cgroupFile is the content of one of the cgroup directory's files (cgroupv2.Files).
func (c *container) cgroupFile(name string) ([]byte, bool) {
	c.cg.mu.Lock()
	cpu := c.cg.cpu
	c.cg.mu.Unlock()
	v := cgroupv2.Values{CPUShares: cpu.Shares, CPUQuota: cpu.Quota, CPUPeriod: cpu.Period, MemoryLimit: c.mem.limit.Load()}
	switch name {
	case "cgroup.procs":
		for _, t := range c.ownTasks() {
			v.Pids = append(v.Pids, t.pid)
		}
		slices.Sort(v.Pids) // the kernel lists a cgroup's processes in the order they joined it: by pid here
	case "cpu.stat", "memory.current":
		st := c.stats()
		v.CPUNanos, v.MemoryBytes = st.CPUNanos, st.MemoryBytes
	case "pids.current":
		c.pidns.mu.Lock()
		v.PidsCurrent = c.procs
		c.pidns.mu.Unlock()
	case "pids.max":
		v.PidsMax = c.pidsLimit()
	}
	return cgroupv2.File(name, v)
}

// sysTree is the container's /sys (vfs.SysTree): only the directories leading to its cgroup, and the
// cgroup's files.
type sysTree struct{ c *container }

func (s sysTree) ReadSys(rel string) ([]byte, bool) {
	name, ok := strings.CutPrefix(rel, "fs/cgroup/")
	if !ok || strings.Contains(name, "/") {
		return nil, false
	}
	return s.c.cgroupFile(name)
}

func (s sysTree) ListSys(rel string) ([]string, bool) {
	switch rel {
	case "":
		return []string{"fs"}, true
	case "fs":
		return []string{"cgroup"}, true
	case "fs/cgroup":
		return cgroupv2.Files(), true
	}
	return nil, false
}

// oomScoreAdj is /proc/<pid>/oom_score_adj of the container's processes.
func (c *container) oomScoreAdj() []byte {
	c.cg.mu.Lock()
	defer c.cg.mu.Unlock()
	return []byte(strconv.FormatInt(c.cg.oomScoreAdj, 10) + "\n")
}

// The mounts runc adds for /sys, as /proc/mounts prints them (a container that is not privileged
// gets both read-only).
const sysMounts = "sysfs /sys sysfs ro,nosuid,nodev,noexec,relatime 0 0\ncgroup /sys/fs/cgroup cgroup2 ro,nosuid,nodev,noexec,relatime 0 0\n"
