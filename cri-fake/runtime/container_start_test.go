package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"syscall"

	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

func TestStartContainer(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	startContainer(t, s, id)
	st := containerState(t, s, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt == 0 {
		t.Fatalf("after start: %v started %d", st.State, st.StartedAt)
	}
	if !filepath.IsAbs(st.LogPath) {
		t.Fatalf("log path %q is not absolute", st.LogPath)
	}
	// A second start is refused: only CREATED containers start.
	_, err := s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestStartContainerInStoppedSandbox(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod}); err != nil {
		t.Fatal(err)
	}
	_, err := s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
	st := containerState(t, s, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128 || st.Reason != "StartError" || st.Message == "" {
		t.Fatalf("failed start not recorded like containerd: %v %d %q %q", st.State, st.ExitCode, st.Reason, st.Message)
	}
}

type failingLauncher struct{ UntilStopped }

func (failingLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	return nil, errors.New("no such file")
}

func TestStartContainerLauncherFails(t *testing.T) {
	s := newService(t, func(o *Options) { o.Launcher = failingLauncher{} })
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	_, err := s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.Unknown)
	if st := containerState(t, s, id); st.Reason != "StartError" || st.ExitCode != 128 {
		t.Fatalf("got %q %d", st.Reason, st.ExitCode)
	}
}

// exitingLauncher gives processes that end by themselves with a code.
type exitingLauncher struct {
	UntilStopped
	code int32
}

func (l exitingLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	p := &exitingProcess{done: make(chan struct{})}
	go func() {
		time.Sleep(10 * time.Millisecond)
		p.once.Do(func() { p.exit = task.Exit{Code: l.code}; close(p.done) })
	}()
	return p, nil
}

// exitingProcess ends by itself (it does not notify its exit, so the runtime watches it).
type exitingProcess struct {
	task.Unsupported
	once sync.Once
	done chan struct{}
	exit task.Exit
}

func (p *exitingProcess) Kill(syscall.Signal) error { return nil }
func (p *exitingProcess) Done() <-chan struct{}     { return p.done }
func (p *exitingProcess) Exit() task.Exit           { return p.exit }

func TestContainerExitsOnItsOwn(t *testing.T) {
	for _, tc := range []struct {
		code   int32
		reason string
	}{{0, "Completed"}, {3, "Error"}} {
		s := newService(t, func(o *Options) { o.Launcher = exitingLauncher{code: tc.code} })
		pod := runPod(t, s, "p")
		id := createContainer(t, s, pod, "c")
		startContainer(t, s, id)
		c, _ := s.containers.Get(id)
		select {
		case <-c.Exited():
		case <-time.After(10 * time.Second):
			t.Fatal("container did not exit")
		}
		st := containerState(t, s, id)
		if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != tc.code || st.Reason != tc.reason || st.FinishedAt < st.StartedAt {
			t.Fatalf("exit %d: got %v %d %q", tc.code, st.State, st.ExitCode, st.Reason)
		}
	}
}

// quickLauncher's processes end before Start returns, as a simulated printf can on a busy
// machine: Start returns only once the clock has moved past the exit time.
type quickLauncher struct {
	UntilStopped
	exitAt time.Duration
}

func (l quickLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	at := time.Now().Add(l.exitAt)
	for !time.Now().After(at) {
	}
	p := &exitingProcess{done: make(chan struct{}), exit: task.Exit{At: at}}
	close(p.done)
	return p, nil
}

// A container is never recorded as finishing before it started: not when its process ended
// before the launcher returned, and not when the launcher's clock puts the exit before the start.
func TestContainerFinishesNoEarlierThanItStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exitAt time.Duration
	}{
		{"exit during Start", 0},
		{"exit stamped before Start", -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(o *Options) { o.Launcher = quickLauncher{exitAt: tc.exitAt} })
			pod := runPod(t, s, "p")
			id := createContainer(t, s, pod, "c")
			startContainer(t, s, id)
			c, _ := s.containers.Get(id)
			select {
			case <-c.Exited():
			case <-time.After(10 * time.Second):
				t.Fatal("container did not exit")
			}
			st := containerState(t, s, id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.StartedAt == 0 || st.FinishedAt < st.StartedAt {
				t.Fatalf("%v started %d finished %d: finished before it started", st.State, st.StartedAt, st.FinishedAt)
			}
		})
	}
}
