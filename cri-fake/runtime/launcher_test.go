package runtime

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestUnsupportedTaskParts: what a task declines with errors.ErrUnsupported (UntilStopped's embed
// task.Unsupported) is answered the way a runtime without the feature answers: the sessions fail
// naming the reason, ReopenContainerLog creates the file itself, the stats stay synthetic, and
// UpdateContainerResources records the resources.
func TestUnsupportedTaskParts(t *testing.T) {
	s := newService(t, func(o *Options) { o.Launcher = UntilStopped{} })
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	startContainer(t, s, id)
	ctx := context.Background()
	rt := s.SessionRuntime()

	var out bytes.Buffer
	if err := rt.Exec(ctx, id, []string{"true"}, nil, nopCloser{&out}, nil, false, nil); err == nil || !strings.Contains(err.Error(), noProcesses) {
		t.Errorf("exec session: %v, want %q", err, noProcesses)
	}
	if err := rt.Attach(ctx, id, nil, nopCloser{&out}, nil, false, nil); err == nil || !strings.Contains(err.Error(), noProcesses) {
		t.Errorf("attach session: %v, want %q", err, noProcesses)
	}
	if err := rt.PortForward(ctx, pod, 80, nil); err == nil || !strings.Contains(err.Error(), noProcesses) {
		t.Errorf("port-forward session: %v, want %q", err, noProcesses)
	}

	c, err := s.containers.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.LogPath); !os.IsNotExist(err) {
		t.Fatalf("a silent task made its log file: %v", err)
	}
	if _, err := s.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.LogPath); err != nil {
		t.Fatalf("ReopenContainerLog did not create the log file: %v", err)
	}

	st, err := s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	if ws := st.GetStats().GetMemory().GetWorkingSetBytes().GetValue(); ws < 4<<20 {
		t.Errorf("working set %d, want the synthetic figure (at least 4 MiB)", ws)
	}

	res := &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20}
	if _, err := s.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: res}); err != nil {
		t.Fatal(err)
	}
	if got := c.Status().Resources.GetMemoryLimitInBytes(); got != 64<<20 {
		t.Errorf("resources not recorded: memory limit %d", got)
	}
}
