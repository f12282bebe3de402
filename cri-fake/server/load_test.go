package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/leakcheck"
	"github.com/plugsim/plugsim/internal/loadtest"
)

// loadTolerance is what a settled cri-fake may keep above a baseline: no goroutine and no fd,
// and heap for the trace ring (its 4,096 events of about a KiB each, which the load fills) and the
// allocator's turnover.
var loadTolerance = leakcheck.Tolerance{HeapBytes: 24 << 20}

// TestLoadPodLifecyclesLeaveNothing is issue 17's load against an in-process cri-fake with its
// process simulation: 64 clients, each on its own connection, run pod lifecycles at once (the
// kubelet's calls for one pod with one container, each answer checked: RunPodSandbox,
// CreateContainer, StartContainer, ContainerStatus RUNNING, PodSandboxStatus READY,
// ListPodSandbox and ListContainers finding exactly it, StopContainer, RemoveContainer,
// StopPodSandbox, RemovePodSandbox). Every call must answer OK, nothing may be left listed, and
// afterwards goroutines, open fds and heap must come back to their baseline (loadTolerance): the
// one taken after a warm-up while the clients are still connected (what each lifecycle leaves),
// then the one taken before any client connected once they have gone (what each connection
// leaves); and the root directory must hold the entries it had.
func TestLoadPodLifecyclesLeaveNothing(t *testing.T) {
	clients, lifecycles := loadtest.Size(t, 2)
	root, logRoot := t.TempDir(), t.TempDir()
	s := startServer(t, Options{RootDir: root, StreamingAddr: "none"})
	ctx := context.Background()
	idle := leakcheck.Take()
	conns := loadtest.Dial(t, s.Endpoint(), clients)
	if _, err := runtimeapi.NewImageServiceClient(conns[0]).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: benchImage}}); err != nil {
		t.Fatal(err)
	}
	var ops atomic.Int64
	run := func(round string, perClient int) []error {
		return loadtest.Run(t, conns, perClient, func(conn *grpc.ClientConn, w, i int) error {
			calls, err := checkedLifecycle(ctx, runtimeapi.NewRuntimeServiceClient(conn), logRoot, fmt.Sprintf("%s-c%d-p%d", round, w, i))
			ops.Add(int64(calls))
			return err
		})
	}
	// The warm-up starts what starts once (the connections' transports, the simulation's caches),
	// so the baseline holds them.
	if errs := run("warm", 1); len(errs) > 0 {
		t.Fatalf("warm-up: %d unexpected errors, first: %v", len(errs), errs[0])
	}
	rootEntries := loadtest.Entries(t, root)
	base := leakcheck.Take()
	ops.Store(0)
	start := time.Now()
	errs := run("load", lifecycles)
	took := time.Since(start)
	loadtest.Report(t, errs)
	rt := runtimeapi.NewRuntimeServiceClient(conns[0])
	pods, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("after the load: %d pods listed (%v), want none", len(pods.GetItems()), err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != 0 {
		t.Fatalf("after the load: %d containers listed (%v), want none", len(ctrs.GetContainers()), err)
	}
	loaded := leakcheck.Settle(t, base, loadTolerance, 2*time.Minute)
	// The clients go away; their connections' goroutines and sockets must end on both sides.
	loadtest.Close(conns)
	settled := leakcheck.Settle(t, idle, loadTolerance, 2*time.Minute)
	if n := loadtest.Entries(t, root); n != rootEntries {
		t.Errorf("root dir holds %d entries after the load, %d before: a lifecycle left files behind", n, rootEntries)
	}
	t.Logf("%d clients × %d pod lifecycles: %d calls, %d unexpected errors, %v (%.0f calls/s); "+
		"before: %v; after, clients connected: %v; before any client: %v; after, clients gone: %v",
		clients, lifecycles, ops.Load(), len(errs), took.Round(time.Millisecond), float64(ops.Load())/took.Seconds(), base, loaded, idle, settled)
}

// checkedLifecycle runs one pod's lifecycle, checking each answer, and returns the calls it made.
func checkedLifecycle(ctx context.Context, rt runtimeapi.RuntimeServiceClient, logRoot, name string) (calls int, _ error) {
	pod := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "load", Uid: "uid-" + name},
		LogDirectory: filepath.Join(logRoot, name),
		Labels:       map[string]string{"io.kubernetes.pod.name": name},
	}
	step := func(what string, f func() error) error {
		calls++
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	var sbID, ctrID string
	steps := []struct {
		what string
		f    func() error
	}{
		{"RunPodSandbox", func() error {
			r, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
			sbID = r.GetPodSandboxId()
			return err
		}},
		{"CreateContainer", func() error {
			r, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, SandboxConfig: pod, Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: benchImage},
				Command: []string{"sleep", "3600"}, LogPath: "app/0.log"}})
			ctrID = r.GetContainerId()
			return err
		}},
		{"StartContainer", func() error {
			_, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctrID})
			return err
		}},
		{"ContainerStatus", func() error {
			r, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrID})
			if err == nil && r.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				err = fmt.Errorf("container %s is %v, want RUNNING", ctrID, r.Status.State)
			}
			return err
		}},
		{"PodSandboxStatus", func() error {
			r, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbID})
			if err == nil && r.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
				err = fmt.Errorf("sandbox %s is %v, want READY", sbID, r.Status.State)
			}
			return err
		}},
		{"ListPodSandbox", func() error {
			r, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: sbID}})
			if err == nil && (len(r.Items) != 1 || r.Items[0].Id != sbID) {
				err = fmt.Errorf("filter by ID %s lists %d sandboxes", sbID, len(r.Items))
			}
			return err
		}},
		{"ListContainers", func() error {
			r, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sbID}})
			if err == nil && (len(r.Containers) != 1 || r.Containers[0].Id != ctrID) {
				err = fmt.Errorf("filter by sandbox %s lists %d containers", sbID, len(r.Containers))
			}
			return err
		}},
		{"StopContainer", func() error {
			_, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctrID, Timeout: 30})
			return err
		}},
		{"RemoveContainer", func() error {
			_, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctrID})
			return err
		}},
		{"StopPodSandbox", func() error {
			_, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbID})
			return err
		}},
		{"RemovePodSandbox", func() error {
			_, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sbID})
			return err
		}},
	}
	for _, s := range steps {
		if err := step(s.what, s.f); err != nil {
			return calls, err
		}
	}
	return calls, nil
}

// startServer starts a cri-fake whose Close the test's cleanup calls.
func startServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
