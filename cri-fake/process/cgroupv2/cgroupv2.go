// Package cgroupv2 writes the files of a cgroup v2 directory in the kernel's formats, from the values a
// container's simulation holds: what a container sees at /sys/fs/cgroup when runc gives it a private
// cgroup namespace on a cgroup v2 node (its own cgroup is the root it sees). The kubelet's in-place
// resize specs read them (test/e2e/common/node/framework/cgroups of k8s.io/kubernetes).
package cgroupv2

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// DefaultCPUPeriod is the kernel's CFS period (100 ms) in µs, what cpu.max shows when none was set.
const DefaultCPUPeriod = 100000

// Values are what the files show.
type Values struct {
	Pids        []int  // the processes in the cgroup (cgroup.procs)
	CPUShares   int64  // cpu_shares as the CRI gives them (cgroup v1's unit; 0: unset)
	CPUQuota    int64  // µs per period (0 or less: no limit)
	CPUPeriod   int64  // µs (0: DefaultCPUPeriod)
	CPUNanos    uint64 // CPU time used
	MemoryBytes uint64 // memory.current
	MemoryLimit int64  // memory.max in bytes (0 or less: max)
	PidsCurrent int
	PidsMax     int
}

// Weight is cgroup v2's cpu.weight for cgroup v1 shares, by the conversion runc applies
// (github.com/opencontainers/cgroups utils.go ConvertCPUSharesToCgroupV2Value): a quadratic in
// log2(shares) through the three points min (2 → 1), default (1024 → 100) and max (262144 → 10000).
// Unset shares leave the kernel's default, 100.
func Weight(shares int64) int64 {
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

// files are the files of the directory, in `ls` order.
var files = []string{
	"cgroup.controllers", "cgroup.procs", "cgroup.subtree_control", "cgroup.type",
	"cpu.max", "cpu.stat", "cpu.weight",
	"memory.current", "memory.high", "memory.max", "memory.min", "memory.oom.group",
	"pids.current", "pids.max",
}

// Files lists the directory's files, in `ls` order.
func Files() []string { return slices.Clone(files) }

// File is the content of one of Files, false for any other name.
func File(name string, v Values) ([]byte, bool) {
	line := func(s string) ([]byte, bool) { return []byte(s + "\n"), true }
	switch name {
	case "cgroup.controllers":
		return line("cpuset cpu io memory hugetlb pids rdma misc")
	case "cgroup.subtree_control":
		return line("")
	case "cgroup.type":
		return line("domain")
	case "cgroup.procs":
		var b []byte
		for _, pid := range v.Pids {
			b = strconv.AppendInt(b, int64(pid), 10)
			b = append(b, '\n')
		}
		return b, true
	case "cpu.max":
		period := v.CPUPeriod
		if period <= 0 {
			period = DefaultCPUPeriod
		}
		quota := "max"
		if v.CPUQuota > 0 {
			quota = strconv.FormatInt(v.CPUQuota, 10)
		}
		return line(fmt.Sprintf("%s %d", quota, period))
	case "cpu.weight":
		return line(strconv.FormatInt(Weight(v.CPUShares), 10))
	case "cpu.stat":
		usec := v.CPUNanos / 1000
		return fmt.Appendf(nil, "usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", usec, usec/2, usec-usec/2), true
	case "memory.current":
		return line(strconv.FormatUint(v.MemoryBytes, 10))
	case "memory.max":
		if v.MemoryLimit > 0 {
			return line(strconv.FormatInt(v.MemoryLimit, 10))
		}
		return line("max")
	case "memory.high":
		return line("max")
	case "memory.min":
		return line("0")
	case "memory.oom.group":
		return line("1") // the OOM killer ends the whole container
	case "pids.current":
		return line(strconv.Itoa(v.PidsCurrent))
	case "pids.max":
		return line(strconv.Itoa(v.PidsMax))
	}
	return nil, false
}
