package server_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/trace"
)

// TestExecSyncFloodStaysBounded is issue 17's measurement against a whole cri-fake: 40 ExecSync
// calls answering 15 MB each took it to 1.65 GB, its trace ring holding every answer. Now the ring
// stays under trace.DefaultMaxBytes and the heap after a GC holds none of the answers. `go test`
// makes 1 call (the simulated head writing 15 MB takes seconds under -race); `make soak` makes
// the 40 (PLUGSIM_EXEC_FLOOD_CALLS).
func TestExecSyncFloodStaysBounded(t *testing.T) {
	calls := 1
	if n, err := strconv.Atoi(os.Getenv("PLUGSIM_EXEC_FLOOD_CALLS")); err == nil {
		calls = n
	}
	const size = 15_000_000
	s, err := server.Start(server.Options{RootDir: t.TempDir(), StreamingAddr: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt, img := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pod := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "flood", Namespace: "ns", Uid: "u"}}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: pod,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
			Command: []string{"sleep", "3600"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range calls {
		r, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})
		if err != nil || len(r.Stdout) != size {
			t.Fatalf("ExecSync %d: %d bytes, %v", i, len(r.GetStdout()), err)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	ring := s.Recorder().Bytes()
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d ExecSync calls of %d bytes: ring %d KiB, heap %+d MiB after GC", calls, size, ring>>10, grown>>20)
	if ring > trace.DefaultMaxBytes {
		t.Fatalf("ring holds %d bytes, bound %d", ring, trace.DefaultMaxBytes)
	}
	if grown > trace.DefaultMaxBytes+(32<<20) {
		t.Fatalf("heap grew by %d MiB over %d calls", grown>>20, calls)
	}
}
