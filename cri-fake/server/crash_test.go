package server

import (
	"context"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/runtime"
	"github.com/plugsim/plugsim/internal/crashtest"
)

// TestRestartSurvivesCrashingContainer: a container saved RUNNING whose command crashes when it is
// restored (a defect injected after the first run) must not stop cri-fake from coming up with its
// state: the server serves, and the container is recorded as EXITED 139; later restarts keep it so.
func TestRestartSurvivesCrashingContainer(t *testing.T) {
	ctx := context.Background()
	state, root := t.TempDir(), t.TempDir()
	s1, c := start(t, Options{StateDir: state, RootDir: root})
	ctr := createContainer(t, c, "crashy", "sh", "-c", "echo started; sleep 100000")
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr}); err != nil {
		t.Fatal(err)
	}
	s1.Close()

	// From now on the container's output path is broken: its restored command crashes.
	var log crashtest.Log
	crashing := func() *runtime.Simulated {
		sim := runtime.NewSimulated()
		sim.Logf = log.Logf
		sim.SpecHook = func(_ string, spec *process.Spec) { spec.Stdout = crashtest.PanicWriter{} }
		return sim
	}
	s2, c2 := start(t, Options{StateDir: state, RootDir: root, Launcher: crashing(), Logf: log.Logf})
	var st *runtimeapi.ContainerStatus
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c2.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr})
		if err != nil {
			t.Fatalf("the restarted server does not answer: %v", err)
		}
		if st = resp.Status; st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restored container still %v", st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.ExitCode != 139 || st.Reason != "Error" {
		t.Fatalf("restored crashing container: exit %d reason %q, want 139 Error", st.ExitCode, st.Reason)
	}
	if l := log.String(); !strings.Contains(l, "injected defect") {
		t.Fatalf("crash not logged:\n%s", l)
	}
	if _, err := c2.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("server not serving after the crash: %v", err)
	}
	s2.Close()

	// The exit was saved: the next restart does not run the command again.
	_, c3 := start(t, Options{StateDir: state, RootDir: root, Launcher: crashing(), Logf: log.Logf})
	resp, err := c3.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr})
	if err != nil || resp.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || resp.Status.ExitCode != 139 {
		t.Fatalf("third start: %v %v", resp, err)
	}
}
