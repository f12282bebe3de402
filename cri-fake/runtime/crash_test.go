package runtime

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/internal/crashtest"
)

// crashingService is a service whose launcher lets hook inject a defect into a container's spec.
func crashingService(t *testing.T, log *crashtest.Log, hook func(id string, spec *process.Spec)) *Service {
	sim := NewSimulated()
	sim.Logf = log.Logf
	sim.SpecHook = hook
	return newService(t, func(o *Options) { o.Launcher = sim; o.Logf = log.Logf })
}

// TestContainerDefectEndsOnlyIt: a container whose process hits a defect of the simulation
// exits 139 (reason Error) with the stack in the runtime's log; its neighbour runs on.
func TestContainerDefectEndsOnlyIt(t *testing.T) {
	var log crashtest.Log
	var crashID string
	var mu sync.Mutex
	s := crashingService(t, &log, func(id string, spec *process.Spec) {
		mu.Lock()
		defer mu.Unlock()
		if id == crashID {
			spec.Stdout = crashtest.PanicWriter{}
		}
	})
	pod := runPod(t, s, "p")
	cfg := containerConfig("crash")
	cfg.Command = []string{"sh", "-c", "echo hello; sleep 3600"}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: podConfig("p")})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	crashID = resp.ContainerId
	mu.Unlock()
	other := createContainer(t, s, pod, "other")
	startContainer(t, s, crashID)
	startContainer(t, s, other)

	st := waitExited(t, s, crashID)
	if st.ExitCode != 139 || st.Reason != "Error" {
		t.Fatalf("crashed container: exit %d reason %q, want 139 Error", st.ExitCode, st.Reason)
	}
	if l := log.String(); !strings.Contains(l, "injected defect") || !strings.Contains(l, "goroutine ") {
		t.Fatalf("no crash report with its stack in the log:\n%s", l)
	}
	res, err := s.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: other, Cmd: []string{"echo", "alive"}})
	if err != nil || string(res.Stdout) != "alive\n" {
		t.Fatalf("neighbour: %v %v", res, err)
	}
}

// TestExecDefectAnswers139: an exec whose command hits a defect answers exit code 139 and the
// container keeps serving execs.
func TestExecDefectAnswers139(t *testing.T) {
	var log crashtest.Log
	s := crashingService(t, &log, func(_ string, spec *process.Spec) {
		spec.Listen = func(string, string) (net.Listener, error) { panic("injected defect") }
	})
	const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53"
	if _, err := s.images.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: agnhost}}); err != nil {
		t.Fatal(err)
	}
	pod := runPod(t, s, "p")
	cfg := containerConfig("a")
	cfg.Image, cfg.Command, cfg.Args = &runtimeapi.ImageSpec{Image: agnhost}, nil, []string{"pause"}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: podConfig("p")})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	res, err := s.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: resp.ContainerId, Cmd: []string{"/agnhost", "netexec"}, Timeout: 60})
	if err != nil || res.ExitCode != 139 {
		t.Fatalf("crashing exec: %v %v, want exit code 139", res, err)
	}
	res, err = s.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: resp.ContainerId, Cmd: []string{"echo", "alive"}})
	if err != nil || string(res.Stdout) != "alive\n" || res.ExitCode != 0 {
		t.Fatalf("next exec: %v %v", res, err)
	}
	if st := containerState(t, s, resp.ContainerId); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %v after its exec crashed", st.State)
	}
}
