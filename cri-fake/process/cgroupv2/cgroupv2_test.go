package cgroupv2

import "testing"

// TestWeight checks runc's conversion at the points it is built through and at the kubelet's shares
// for common requests (1 CPU: 1024 shares; 100m: 102; 2 CPUs: 2048), as the quadratic gives them.
func TestWeight(t *testing.T) {
	for shares, want := range map[int64]int64{0: 100, 1: 1, 2: 1, 102: 17, 1024: 100, 2048: 174, 262144: 10000, 1 << 20: 10000} {
		if got := Weight(shares); got != want {
			t.Errorf("Weight(%d) = %d, want %d", shares, got, want)
		}
	}
}

// TestFile checks the formats the in-place resize specs parse, and that every listed file has content.
func TestFile(t *testing.T) {
	v := Values{Pids: []int{1, 7}, CPUQuota: 50000, MemoryLimit: 64 << 20, PidsCurrent: 2, PidsMax: 1024}
	for name, want := range map[string]string{
		"cpu.max": "50000 100000\n", "memory.max": "67108864\n", "cgroup.procs": "1\n7\n",
		"pids.current": "2\n", "pids.max": "1024\n", "cpu.weight": "100\n",
	} {
		if got, ok := File(name, v); !ok || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, ok, want)
		}
	}
	if got, _ := File("cpu.max", Values{}); string(got) != "max 100000\n" {
		t.Errorf("cpu.max without a quota = %q", got)
	}
	for _, name := range Files() {
		if _, ok := File(name, v); !ok {
			t.Errorf("%s is listed but has no content", name)
		}
	}
	if _, ok := File("memory.swap.max", v); ok {
		t.Error("a file not listed has content")
	}
}
