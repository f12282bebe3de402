package runtime

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

func workingSet(t *testing.T, s *Service, id string) uint64 {
	t.Helper()
	st, err := s.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	return st.GetStats().GetMemory().GetWorkingSetBytes().GetValue()
}

// critest's "Container OOM" through the CRI: dd bs=20M under a 15 MiB limit ends EXITED with
// 137 and reason OOMKilled, as containerd reports it.
func TestSimulatedOOMKilled(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "oom")
	cfg := containerConfig("oom")
	cfg.Command = []string{"sh", "-c", "dd if=/dev/zero of=/dev/null bs=20M"}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 15 << 20, MemorySwapLimitInBytes: 15 << 20}}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	st := waitExited(t, s, resp.ContainerId)
	if st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Fatalf("exit %d reason %q; want 137 OOMKilled", st.ExitCode, st.Reason)
	}
}

// The working set climbs with what the container writes to /dev/shm, and a limit lowered by
// UpdateContainerResources below it OOM-kills the container; a KILL without the OOM killer
// stays "Error".
func TestSimulatedOOMStatsAndUpdate(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "climb")
	id := runWith(t, s, pod, "app", nil, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20})
	last := workingSet(t, s, id)
	for i := 0; i < 3; i++ {
		resp, err := execSync(t, s, id, 30, "sh", "-c", "dd if=/dev/zero of=/dev/shm/f$RANDOM$$ bs=1M count=8 status=none")
		if err != nil || resp.ExitCode != 0 {
			t.Fatalf("write %d: %v %v %q", i, err, resp.GetExitCode(), resp.GetStderr())
		}
		now := workingSet(t, s, id)
		if now < last+8<<20 {
			t.Fatalf("write %d of 8 MiB: working set from %d to %d", i, last, now)
		}
		last = now
	}
	if _, err := s.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 16 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, s, id); st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Fatalf("after lowering the limit: exit %d reason %q; want 137 OOMKilled", st.ExitCode, st.Reason)
	}
	other := runWith(t, s, pod, "killed", nil, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20})
	if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: other, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, s, other); st.Reason == "OOMKilled" {
		t.Fatalf("a stopped container reports %q", st.Reason)
	}
}

// The IPC namespace a container joins follows the sandbox's NamespaceOption.ipc: the pod's for
// POD (the same for its containers, another for another pod), the node's for NODE, and its own
// without namespace options.
func TestSimulatedIPCNamespace(t *testing.T) {
	l := NewSimulated()
	spec := func(sandbox string, mode runtimeapi.NamespaceMode, withOpts bool) task.Spec {
		sc := &runtimeapi.LinuxSandboxSecurityContext{}
		if withOpts {
			sc.NamespaceOptions = &runtimeapi.NamespaceOption{Ipc: mode}
		}
		return task.Spec{SandboxID: sandbox, SandboxConfig: &runtimeapi.PodSandboxConfig{Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc}}}
	}
	a1, a2 := l.ipcNamespace(spec("a", runtimeapi.NamespaceMode_POD, true)), l.ipcNamespace(spec("a", runtimeapi.NamespaceMode_POD, true))
	b := l.ipcNamespace(spec("b", runtimeapi.NamespaceMode_POD, true))
	n1, n2 := l.ipcNamespace(spec("a", runtimeapi.NamespaceMode_NODE, true)), l.ipcNamespace(spec("c", runtimeapi.NamespaceMode_NODE, true))
	switch {
	case a1 == nil || a1 != a2:
		t.Error("a pod's containers do not share its IPC namespace")
	case b == a1:
		t.Error("two pods share an IPC namespace")
	case n1 == nil || n1 != n2 || n1 == a1:
		t.Error("hostIPC pods do not share the node's IPC namespace")
	case l.ipcNamespace(spec("a", 0, false)) != nil:
		t.Error("a sandbox without namespace options got a shared IPC namespace")
	}
}
