package kernel

import (
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process/sched"
)

// A container's processes run on the node's simulated CPUs (package sched): its threads are a
// group there, which the CRI's cpu_quota and cpu_period throttle, and the time they held CPUs is
// its CPU time (Stats).

// CPUScheduler is the node's CPUs, which every container's processes share (sched.Scheduler).
type CPUScheduler = sched.Scheduler

// NewCPUScheduler returns a node of n CPUs; n ≤ 0 means sched.DefaultCPUs.
func NewCPUScheduler(n int) *CPUScheduler { return sched.New(n) }

// DefaultCPUPeriod is the period of a CPU quota given without one (the kernel's cpu.max default).
const DefaultCPUPeriod = 100 * time.Millisecond

// CPULimit is the CPU bandwidth a container's resources ask for: cpu_quota per cpu_period, both
// in microseconds as CFS takes them (the kubelet writes a CPU limit of 500m as 50000 per
// 100000). A quota of 0 or less (-1 is "max") is no limit.
func CPULimit(r *runtimeapi.LinuxContainerResources) (quota, period time.Duration) {
	if r.GetCpuQuota() <= 0 {
		return 0, 0
	}
	return time.Duration(r.GetCpuQuota()) * time.Microsecond, time.Duration(max(r.GetCpuPeriod(), 0)) * time.Microsecond
}

// startCPUGroup puts the container on the runtime's CPUs (its own when the spec names none),
// with its quota.
func (c *container) startCPUGroup() {
	s := c.spec.CPU
	if s == nil {
		s = NewCPUScheduler(0)
	}
	c.cpu = s.NewGroup()
	c.setCPULimit(c.spec.CPUQuota, c.spec.CPUPeriod)
}

func (c *container) setCPULimit(quota, period time.Duration) {
	if period <= 0 {
		period = DefaultCPUPeriod
	}
	c.cpu.SetQuota(quota, period)
}

// SetCPULimit changes the container's CPU quota per period (UpdateContainerResources; a quota
// of 0 is none, a period of 0 is DefaultCPUPeriod), from the current period on.
func (p *Process) SetCPULimit(quota, period time.Duration) { p.c.setCPULimit(quota, period) }

// Throttled is how many periods the container's quota throttled it in (cpu.stat nr_throttled).
func (p *Process) Throttled() int64 { return p.c.cpu.Throttled() }

// Step is where a program's work is cut into steps (each command a shell runs, each block an
// applet copies, each line it reads): the program runs on as long as it holds a CPU for less
// than a quantum, else it waits for one (its container's turn, its quota). It returns the
// process's context error once the process was killed, so a loop can stop there.
func (p *Proc) Step() error {
	return p.th.Step(p.t.ctx)
}

// Idle gives the caller's CPU to another thread before the caller blocks (sleeps, waits for a
// child or a job); its next Step asks for one again.
func (p *Proc) Idle() { p.th.Idle() }

// NewThread is p for another goroutine of the same process: a pipeline element the shell runs
// beside the others (ash forks a subshell for each), which needs a CPU of its own.
func (p *Proc) NewThread() *Proc {
	q := *p
	q.th = p.c.cpu.NewThread()
	return &q
}
