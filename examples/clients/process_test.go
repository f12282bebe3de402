package clients

import (
	"context"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
)

// The process API cri-fake/process/README.md shows a runtime, for the CPU and the memory limit,
// from a module of its own: the node's CPUs, a CPU quota from CRI resources, Stats and the OOM
// killer of what a shell holds.
func TestProcessCPUAndMemoryAPI(t *testing.T) {
	cpus := process.NewCPUScheduler(0) // one per runtime
	fsys, err := process.NewFS(process.FSConfig{Hostname: "api"})
	if err != nil {
		t.Fatal(err)
	}
	quota, period := process.CPULimit(&runtimeapi.LinuxContainerResources{CpuQuota: 10_000, CpuPeriod: 100_000})
	if quota != 10*time.Millisecond || period != 100*time.Millisecond {
		t.Fatalf("CPULimit: %v per %v", quota, period)
	}
	p, err := process.Start(context.Background(), process.Spec{Args: []string{"sh", "-c", "while :; do :; done"}, FS: fsys,
		CPU: cpus, CPUQuota: quota, CPUPeriod: period, MemoryLimit: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Signal(syscall.SIGKILL); p.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for p.Throttled() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a busy loop under 10 ms per 100 ms was never throttled; stats %+v", p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.SetCPULimit(0, 0) // UpdateContainerResources without a quota
	if p.Stats().CPUNanos == 0 {
		t.Fatal("no CPU time")
	}
	_, _, code, _ := p.ExecSync(context.Background(), []string{"sh", "-c", `x=$(head -c 15000000 /dev/zero); y=$(head -c 15000000 /dev/zero); z=$(head -c 15000000 /dev/zero)`}, 0)
	if code != 137 || !p.OOMKilled() {
		t.Fatalf("three 15 MB variables under 32 MiB: exit %d, OOMKilled %v", code, p.OOMKilled())
	}
}
