package runtime

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

func TestStopContainer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  int64
		code     int32
		reason   string
		launcher Launcher
	}{
		// UntilStopped ends cleanly on the stop signal, like a server.
		{"graceful", 30, 0, "Completed", UntilStopped{}},
		{"kill at once", 0, 137, "Error", UntilStopped{}},
		// The simulated `sleep 3600` ends on TERM with 128+15, as sleep does without a handler.
		{"simulated sleep, TERM", 30, 143, "Error", nil},
		{"simulated sleep, kill at once", 0, 137, "Error", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(o *Options) { o.Launcher = tc.launcher })
			pod := runPod(t, s, "p")
			id := createContainer(t, s, pod, "c")
			startContainer(t, s, id)
			start := time.Now()
			for range 2 { // idempotent
				if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: tc.timeout}); err != nil {
					t.Fatal(err)
				}
			}
			if time.Since(start) >= time.Duration(max(tc.timeout, 1))*time.Second {
				t.Fatalf("StopContainer waited out its timeout for a process that ends on the signal")
			}
			st := containerState(t, s, id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != tc.code || st.Reason != tc.reason || st.FinishedAt == 0 {
				t.Fatalf("got %v %d %q", st.State, st.ExitCode, st.Reason)
			}
		})
	}
}

func TestStopContainerNotFoundAndCreated(t *testing.T) {
	s := newService(t)
	_, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: "nope"})
	wantCode(t, err, codes.OK)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	_, err = s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1})
	wantCode(t, err, codes.OK)
	if st := containerState(t, s, id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("stopping a CREATED container changed it to %v", st.State)
	}
}

// stubbornProcess ignores everything but SIGKILL, and records the signals it got.
type stubbornProcess struct {
	task.Unsupported
	mu   sync.Mutex
	sigs []syscall.Signal
	once sync.Once
	done chan struct{}
}

func (p *stubbornProcess) Kill(sig syscall.Signal) error {
	p.mu.Lock()
	p.sigs = append(p.sigs, sig)
	p.mu.Unlock()
	if sig == syscall.SIGKILL {
		p.once.Do(func() { close(p.done) })
	}
	return nil
}
func (p *stubbornProcess) Done() <-chan struct{} { return p.done }
func (p *stubbornProcess) Exit() task.Exit       { return task.Exit{Code: 137} }

type stubbornLauncher struct {
	UntilStopped
	procs chan *stubbornProcess
}

func (l stubbornLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	p := &stubbornProcess{done: make(chan struct{})}
	l.procs <- p
	return p, nil
}

func TestStopContainerKillsAfterTimeout(t *testing.T) {
	l := stubbornLauncher{procs: make(chan *stubbornProcess, 1)}
	s := newService(t, func(o *Options) { o.Launcher = l })
	pod := runPod(t, s, "p")
	cfg := containerConfig("c")
	cfg.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, resp.ContainerId)
	p := <-l.procs
	start := time.Now()
	if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: resp.ContainerId, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < time.Second {
		t.Fatalf("killed before the 1s timeout")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sigs) != 2 || p.sigs[0] != syscall.SIGUSR1 || p.sigs[1] != syscall.SIGKILL {
		t.Fatalf("signals %v, want [SIGUSR1 SIGKILL] (the configured stop signal, then KILL)", p.sigs)
	}
	if st := containerState(t, s, resp.ContainerId); st.ExitCode != 137 || st.Reason != "Error" {
		t.Fatalf("exit %d %q", st.ExitCode, st.Reason)
	}
}

func TestStopContainerContextCancelled(t *testing.T) {
	l := stubbornLauncher{procs: make(chan *stubbornProcess, 1)}
	s := newService(t, func(o *Options) { o.Launcher = l })
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	startContainer(t, s, id)
	<-l.procs
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 60})
	wantCode(t, err, codes.DeadlineExceeded)
}
