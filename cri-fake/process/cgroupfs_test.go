package process

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCgroupFilesFollowResources: what the kubelet's in-place resize is checked by
// (test/e2e/common/node/framework/cgroups of k8s.io/kubernetes): `mount -t cgroup2` names
// /sys/fs/cgroup, so the v2 file names are read; cpu.max, cpu.weight and memory.max show
// CreateContainer's resources in runc's formats, then UpdateContainerResources'; oom_score_adj
// is the CRI's. The tree is read-only.
func TestCgroupFilesFollowResources(t *testing.T) {
	p := startProc(t, Spec{Args: []string{"sleep", "100000"}, MemoryLimit: 45 << 20,
		CPUShares: 30, CPUQuota: 3 * time.Millisecond, CPUPeriod: 100 * time.Millisecond, OOMScoreAdj: 984})
	ctx := context.Background()
	read := func(cmd string) string {
		t.Helper()
		out, errb, code, err := p.ExecSync(ctx, []string{"/bin/sh", "-c", cmd}, 0)
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %q %v", cmd, code, errb, err)
		}
		return string(out)
	}
	if out := read("mount -t cgroup2"); out != "cgroup on /sys/fs/cgroup type cgroup2 (ro,nosuid,nodev,noexec,relatime)\n" {
		t.Errorf("mount -t cgroup2: %q", out)
	}
	for _, c := range []struct{ cmd, want string }{
		{"head -n 1 /sys/fs/cgroup/cpu.max", "3000 100000\n"},
		// runc's v1 → v2 conversion: 30 shares (30m) is weight 7; 1024 (the default) 100.
		{"head -n 1 /sys/fs/cgroup/cpu.weight", "7\n"},
		{"head -n 1 /sys/fs/cgroup/memory.max", "47185920\n"},
		{"cat /proc/1/oom_score_adj", "984\n"},
		{"cat /proc/self/cgroup", "0::/\n"},
		{"ls /sys/fs", "cgroup\n"},
		{"ls /sys/fs/cgroup | grep -c '^cpu\\.'", "3\n"},
		{"head -n 1 /sys/fs/cgroup/cgroup.procs", "1\n"},
		{"{ echo 5 > /sys/fs/cgroup/cpu.max; } 2>&1; echo $?", "/bin/sh: can't create /sys/fs/cgroup/cpu.max: Read-only file system\n1\n"},
	} {
		if got := read(c.cmd); got != c.want {
			t.Errorf("%s: %q, want %q", c.cmd, got, c.want)
		}
	}

	p.UpdateResources(&runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: -1, CpuPeriod: 100000, MemoryLimitInBytes: 0, OomScoreAdj: -997})
	for _, c := range []struct{ cmd, want string }{
		{"head -n 1 /sys/fs/cgroup/cpu.max", "max 100000\n"},
		{"head -n 1 /sys/fs/cgroup/cpu.weight", "100\n"},
		{"head -n 1 /sys/fs/cgroup/memory.max", "max\n"},
		{"cat /proc/1/oom_score_adj", "-997\n"},
	} {
		if got := read(c.cmd); got != c.want {
			t.Errorf("after the update, %s: %q, want %q", c.cmd, got, c.want)
		}
	}
	if out := read("cat /proc/mounts"); !strings.Contains(out, "sysfs /sys sysfs ro,") || !strings.Contains(out, "cgroup /sys/fs/cgroup cgroup2 ro,") {
		t.Errorf("/proc/mounts lacks /sys or its cgroup2:\n%s", out)
	}
	if out := read("grep -c ' /sys/fs/cgroup .* - cgroup2 ' /proc/self/mountinfo"); out != "1\n" {
		t.Errorf("mountinfo's cgroup2 lines: %q", out)
	}
}

// TestCPUWeightIsRuncs: the shares the kubelet sends (MilliCPUToShares: 2 at least) and the weight
// runc writes for them, at the three points its conversion is fitted to and between.
func TestCPUWeightIsRuncs(t *testing.T) {
	for shares, want := range map[int64]int64{0: 100, 2: 1, 20: 6, 1024: 100, 512: 59, 262144: 10000, 300000: 10000} {
		p := startProc(t, Spec{Args: []string{"sleep", "100000"}, CPUShares: shares})
		out, _, _, _ := p.ExecSync(context.Background(), []string{"cat", "/sys/fs/cgroup/cpu.weight"}, 0)
		if got := strings.TrimSpace(string(out)); got != strconv.FormatInt(want, 10) {
			t.Errorf("shares %d: cpu.weight %s, want %d", shares, got, want)
		}
	}
}
