package kernel

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// defaultCPUPeriod is the kernel's CFS period (100 ms), what cpu.max shows when none was set.
const defaultCPUPeriod = 100000

// cpuWeight is cgroup v2's cpu.weight for cgroup v1 shares, by the conversion runc applies
// (github.com/opencontainers/cgroups utils.go ConvertCPUSharesToCgroupV2Value): a quadratic in
// log2(shares) through the three points min (2 → 1), default (1024 → 100) and max (262144 → 10000).
// Unset shares leave the kernel's default, 100.
func cpuWeight(shares int64) int64 {
	switch {
	case shares == 0:
		return 100
	case shares <= 2:
		return 1
	case shares >= 262144:
		return 10000
	}
	l := math.Log2(float64(shares))
	return int64(math.Ceil(math.Pow(10, (l*l+125*l)/612.0-7.0/34.0)))
}

// cgroupFiles are the files of the container's cgroup directory, in `ls` order.
var cgroupFiles = []string{
	"cgroup.controllers", "cgroup.procs", "cgroup.subtree_control", "cgroup.type",
	"cpu.max", "cpu.stat", "cpu.weight",
	"memory.current", "memory.high", "memory.max", "memory.min", "memory.oom.group",
	"pids.current", "pids.max",
}

// cgroupFile is the content of one of cgroupFiles.
func (c *container) cgroupFile(name string) ([]byte, bool) {
	c.cg.mu.Lock()
	cpu := c.cg.cpu
	c.cg.mu.Unlock()
	line := func(s string) ([]byte, bool) { return []byte(s + "\n"), true }
	switch name {
	case "cgroup.controllers":
		return line("cpuset cpu io memory hugetlb pids rdma misc")
	case "cgroup.subtree_control":
		return line("")
	case "cgroup.type":
		return line("domain")
	case "cgroup.procs":
		var b strings.Builder
		for _, t := range c.ownTasks() {
			fmt.Fprintf(&b, "%d\n", t.pid)
		}
		return []byte(b.String()), true
	case "cpu.max":
		period := cpu.Period
		if period <= 0 {
			period = defaultCPUPeriod
		}
		quota := "max"
		if cpu.Quota > 0 {
			quota = strconv.FormatInt(cpu.Quota, 10)
		}
		return line(fmt.Sprintf("%s %d", quota, period))
	case "cpu.weight":
		return line(strconv.FormatInt(cpuWeight(cpu.Shares), 10))
	case "cpu.stat":
		usec := c.stats().CPUNanos / 1000
		return []byte(fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", usec, usec/2, usec-usec/2)), true
	case "memory.current":
		return line(strconv.FormatUint(c.stats().MemoryBytes, 10))
	case "memory.max":
		if n := c.mem.limit.Load(); n > 0 {
			return line(strconv.FormatInt(n, 10))
		}
		return line("max")
	case "memory.high":
		return line("max")
	case "memory.min":
		return line("0")
	case "memory.oom.group":
		return line("1") // the OOM killer ends the whole container (memory.go)
	case "pids.current":
		c.pidns.mu.Lock()
		n := c.procs
		c.pidns.mu.Unlock()
		return line(strconv.Itoa(n))
	case "pids.max":
		return line(strconv.Itoa(c.pidsLimit()))
	}
	return nil, false
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
		return slices.Clone(cgroupFiles), true
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
