package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runWith creates and starts a container running sleep with the given mounts and resources.
func runWith(t *testing.T, s *Service, pod, name string, mounts []*runtimeapi.Mount, res *runtimeapi.LinuxContainerResources) string {
	t.Helper()
	cfg := containerConfig(name)
	cfg.Mounts = mounts
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: res}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	startContainer(t, s, resp.ContainerId)
	return resp.ContainerId
}

// Issue 12's reproduction through ExecSync: with the host mount x:/data, a symlink to a host file
// or directory outside x reads, writes, creates and removes nothing there.
func TestSimulatedMountConfined(t *testing.T) {
	base := t.TempDir()
	// The mount source two levels below base, so that ../../victims, relative to it on the host,
	// names the victims (as in the layout).
	x, v := filepath.Join(base, "m", "x"), filepath.Join(base, "victims")
	for _, d := range []string{x, filepath.Join(v, "vdir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(v, "secret.txt")
	if err := os.WriteFile(secret, []byte("the secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newService(t)
	pod, _ := simPodRun(t, s, "confined")
	id := runWith(t, s, pod, "app", []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: x}}, nil)
	script := "ln -s " + secret + " /data/link; cat /data/link; echo PWNED > /data/link; ln -s ../../victims /data/up; " +
		"echo new > /data/up/created.txt; rm -rf /data/up/vdir; echo inside > /data/ok; cat /data/ok"
	resp, err := execSync(t, s, id, 10, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resp.Stdout), "secret") || string(resp.Stdout) != "inside\n" {
		t.Errorf("stdout %q, want only %q", resp.Stdout, "inside\n")
	}
	for _, want := range []string{"cat: can't open '/data/link'", "can't create /data/link", "can't create /data/up/created.txt"} {
		if !strings.Contains(string(resp.Stderr), want) {
			t.Errorf("stderr %q lacks %q", resp.Stderr, want)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "the secret\n" {
		t.Errorf("victim file: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(v, "created.txt")); !os.IsNotExist(err) {
		t.Errorf("a file was created beside the victim: %v", err)
	}
	if st, err := os.Stat(filepath.Join(v, "vdir")); err != nil || !st.IsDir() {
		t.Errorf("victim directory: %v, %v", st, err)
	}
	if data, err := os.ReadFile(filepath.Join(x, "ok")); err != nil || string(data) != "inside\n" {
		t.Errorf("a write inside the mount: %q, %v", data, err)
	}
}

// The container's memory limit bounds its in-memory files, from CreateContainer and then from
// UpdateContainerResources.
func TestSimulatedMemoryLimitBoundsFiles(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "bounded")
	id := runWith(t, s, pod, "app", nil, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20})
	fill := func() (*runtimeapi.ExecSyncResponse, int) {
		t.Helper()
		resp, err := execSync(t, s, id, 10, "sh", "-c", "rm -f /tmp/fill; cat /dev/zero > /tmp/fill; wc -c < /tmp/fill")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(resp.Stdout)))
		if err != nil {
			t.Fatalf("wc -c: %q: %v", resp.Stdout, err)
		}
		return resp, n
	}
	layer := func() uint64 {
		t.Helper()
		st, err := s.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return st.GetStats().GetWritableLayer().GetUsedBytes().GetValue()
	}
	before := layer() // a synthetic base, plus the container's generated files
	resp, n := fill()
	if resp.ExitCode != 0 || string(resp.Stderr) != "cat: write error: No space left on device\n" || n > 1<<20 || n < 1<<19 {
		t.Fatalf("fill under 1 MiB: exit %d stderr %q, %d bytes kept", resp.ExitCode, resp.Stderr, n)
	}
	if _, err := s.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 2 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	if resp, n = fill(); n <= 1<<20 || n > 2<<20 {
		t.Errorf("fill under 2 MiB after UpdateContainerResources: stderr %q, %d bytes kept", resp.Stderr, n)
	}
	if grown := layer() - before; grown > 2<<20 {
		t.Errorf("writable layer grew by %d bytes, over the 2 MiB limit", grown)
	}
}
