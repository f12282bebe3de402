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

func TestStreamingWithoutSimulation(t *testing.T) {
	s := newService(t, func(o *Options) { o.Launcher = UntilStopped{} })
	pod := runPod(t, s, "p")
	created := createContainer(t, s, pod, "created")
	running := createContainer(t, s, pod, "running")
	startContainer(t, s, running)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"ExecSync unknown", func() error {
			_, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "nope", Cmd: []string{"true"}})
			return err
		}, codes.NotFound},
		{"ExecSync created", func() error {
			_, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: created, Cmd: []string{"true"}})
			return err
		}, codes.FailedPrecondition},
		{"ExecSync no cmd", func() error {
			_, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: running})
			return err
		}, codes.InvalidArgument},
		{"ExecSync running", func() error {
			_, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: running, Cmd: []string{"true"}})
			return err
		}, codes.Unimplemented},
		{"Exec running", func() error {
			_, err := s.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: running, Cmd: []string{"sh"}})
			return err
		}, codes.Unimplemented},
		{"Exec created", func() error {
			_, err := s.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: created, Cmd: []string{"sh"}})
			return err
		}, codes.FailedPrecondition},
		{"Attach running", func() error { _, err := s.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: running}); return err }, codes.Unimplemented},
		{"Attach unknown", func() error { _, err := s.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "nope"}); return err }, codes.NotFound},
		{"PortForward", func() error {
			_, err := s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: pod, Port: []int32{80}})
			return err
		}, codes.Unimplemented},
		{"PortForward unknown", func() error {
			_, err := s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "nope"})
			return err
		}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), tc.want) })
	}
}

// execProcess runs until stopped and answers ExecSync: "echo" prints its arguments, "sleep"
// blocks until the context ends.
type execProcess struct {
	task.Unsupported
	once sync.Once
	done chan struct{}
}

func (p *execProcess) Kill(syscall.Signal) error { p.once.Do(func() { close(p.done) }); return nil }
func (p *execProcess) Done() <-chan struct{}     { return p.done }
func (p *execProcess) Exit() task.Exit           { return task.Exit{} }
func (p *execProcess) ExecSync(ctx context.Context, cmd []string) (task.ExecResult, error) {
	switch cmd[0] {
	case "echo":
		return task.ExecResult{Stdout: []byte(cmd[1])}, nil
	case "sleep":
		<-ctx.Done()
		return task.ExecResult{}, ctx.Err()
	}
	return task.ExecResult{Stderr: []byte(cmd[0] + ": not found"), ExitCode: 127}, nil
}

type execLauncher struct{ UntilStopped }

func (execLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	return &execProcess{done: make(chan struct{})}, nil
}

type fakeStreaming struct{}

func (fakeStreaming) GetExec(r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:1/exec/" + r.ContainerId[:8]}, nil
}
func (fakeStreaming) GetAttach(r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return &runtimeapi.AttachResponse{Url: "http://127.0.0.1:1/attach/" + r.ContainerId[:8]}, nil
}
func (fakeStreaming) GetPortForward(r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return &runtimeapi.PortForwardResponse{Url: "http://127.0.0.1:1/portforward/" + r.PodSandboxId[:8]}, nil
}

func TestStreamingWithSimulation(t *testing.T) {
	s := newService(t, func(o *Options) { o.Launcher = execLauncher{}; o.Streaming = fakeStreaming{} })
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	startContainer(t, s, id)
	ctx := context.Background()

	resp, err := s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"echo", "hello"}})
	if err != nil || string(resp.Stdout) != "hello" || resp.ExitCode != 0 {
		t.Fatalf("echo: %v %v", resp, err)
	}
	resp, err = s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"nosuch"}})
	if err != nil || resp.ExitCode != 127 {
		t.Fatalf("nosuch: %v %v", resp, err)
	}
	start := time.Now()
	_, err = s.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sleep", "4321"}, Timeout: 1})
	wantCode(t, err, codes.DeadlineExceeded)
	if time.Since(start) > 10*time.Second {
		t.Fatal("the exec timeout was not applied")
	}
	ex, err := s.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Stdout: true})
	if err != nil || ex.Url == "" {
		t.Fatalf("Exec: %v %v", ex, err)
	}
	at, err := s.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true})
	if err != nil || at.Url == "" {
		t.Fatalf("Attach: %v %v", at, err)
	}
	pf, err := s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: pod, Port: []int32{80}})
	if err != nil || pf.Url == "" {
		t.Fatalf("PortForward: %v %v", pf, err)
	}
	// The task does not notify its exit: a stop is recorded through the goroutine watching it.
	if _, err := s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	if st := containerState(t, s, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("after stop: %v", st.State)
	}
	_, err = s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: pod})
	wantCode(t, err, codes.OK)
	s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: pod})
	_, err = s.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: pod})
	wantCode(t, err, codes.FailedPrecondition)
}
