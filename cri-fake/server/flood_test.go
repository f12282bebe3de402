package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/leakcheck"
	"github.com/plugsim/plugsim/internal/loadtest"
	"github.com/plugsim/plugsim/internal/polltest"
)

// heapInUse is the heap now, without a collection (a sample of the peak while a flood runs).
func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestContainerLogFloodStaysBounded is issue 17's flood of a container log: a container printing
// 100 MB (`make soak`, PLUGSIM_LOG_FLOOD_MB; 4 MB in `go test`) as fast as its process can. All
// of it must reach the log file (the file is the kubelet's to rotate), while the heap, sampled
// every few milliseconds until the container has exited, never holds more than a bound that has
// nothing to do with the output's size: 32 MiB over the heap in use before.
func TestContainerLogFloodStaysBounded(t *testing.T) {
	mb := loadtest.Count(t, "PLUGSIM_LOG_FLOOD_MB", 4)
	size := mb * 1_000_000
	_, c := start(t, Options{RootDir: t.TempDir(), StreamingAddr: "none"})
	ctx := context.Background()
	logDir := t.TempDir()
	pod := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "flood", Namespace: "ns", Uid: "u"}, LogDirectory: logDir}
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logDir, "printer"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctr, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: pod,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "printer"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
			Command: []string{"sh", "-c", fmt.Sprintf("yes %s | head -c %d", strings.Repeat("x", 99), size)}, LogPath: "printer/0.log"}})
	if err != nil {
		t.Fatal(err)
	}
	base := leakcheck.Take()
	peak := base.HeapBytes
	start := time.Now()
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	var st *runtimeapi.ContainerStatus
	polltest.Until(t, "the printing container to exit", 20*time.Minute, 5*time.Millisecond, func() (bool, string) {
		peak = max(peak, heapInUse())
		r, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ContainerId})
		if err != nil {
			return false, err.Error()
		}
		st = r.Status
		return st.State == runtimeapi.ContainerState_CONTAINER_EXITED, st.State.String()
	})
	took := time.Since(start)
	if st.ExitCode != 0 {
		t.Fatalf("the printing container exited %d (%s)", st.ExitCode, st.Message)
	}
	logPath := filepath.Join(logDir, "printer", "0.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := logContent(t, logPath); got != int64(size) {
		t.Fatalf("the log's records hold %d bytes of output, the container printed %d", got, size)
	}
	grown := peak - base.HeapBytes
	t.Logf("a container printing %d MB in lines of 100 bytes: %v, log file %d MB, heap in use at most %+.1f MiB over the %.1f MiB before",
		mb, took.Round(time.Millisecond), fi.Size()/1_000_000, float64(grown)/(1<<20), float64(base.HeapBytes)/(1<<20))
	if grown > 32<<20 {
		t.Fatalf("the heap in use grew by %d MiB while a container printed %d MB", grown>>20, mb)
	}
}

// logContent is how many bytes of output the CRI log at path holds: each record's content, and
// the newline an F record ends.
func logContent(tb testing.TB, path string) int64 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// <timestamp> <stream> <P|F> <content>
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) != 4 || (fields[2] != "P" && fields[2] != "F") {
			tb.Fatalf("%s: not a CRI log record: %.80q", path, sc.Text())
		}
		n += int64(len(fields[3]))
		if fields[2] == "F" {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestUnreadEventStreamsStayBounded is issue 17's client holding 1,000 streams (`make soak`,
// PLUGSIM_EVENT_STREAMS; 20 in `go test`): it opens them as GetContainerEvents streams on one
// connection and never reads them, while pods come and go. What cri-fake keeps for a listener
// that does not read is bounded (1,024 queued events, then events are dropped as containerd's
// are, and gRPC's 64 KiB write quota a stream): rounds of 1,200 events go on until a round grows
// the heap by under 2 MiB (every queue is full: how many rounds that takes depends on how fast
// the handlers fill their quota), and the heap then must hold at most 512 KiB a stream. When the
// client goes, every stream's goroutine and the connection must end (leakcheck's baseline taken
// before it connected).
func TestUnreadEventStreamsStayBounded(t *testing.T) {
	streams := loadtest.Count(t, "PLUGSIM_EVENT_STREAMS", 20)
	// The trace ring keeps nothing: its own bound is TestExecSyncFloodStaysBounded's, and its
	// events filling it would hide what the streams keep.
	s, c := start(t, Options{RootDir: t.TempDir(), StreamingAddr: "none", TraceCapacity: -1})
	ctx := context.Background()
	if _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil { // the pods' connection, up before the baseline
		t.Fatal(err)
	}
	idle := leakcheck.Take()
	// The client's receive windows are fixed at HTTP/2's 64 KiB (no BDP estimation, which would
	// let each stream buffer up to 16 MiB in this process's client): the heap measured is then
	// cri-fake's.
	conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	for i := range streams {
		if _, err := rt.GetContainerEvents(sctx, &runtimeapi.GetEventsRequest{}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	// Each stream has a handler goroutine in the server once its call has arrived.
	polltest.Until(t, "the streams' handlers to run", 5*time.Minute, 10*time.Millisecond, func() (bool, string) {
		n := runtime.NumGoroutine()
		return n >= idle.Goroutines+streams, fmt.Sprintf("%d goroutines", n)
	})
	pods := func(round string, n int) {
		for i := range n {
			sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig(fmt.Sprintf("%s-%d", round, i))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Three events a pod (created, started; deleted): a round of 400 is more than a queue holds.
	prev := leakcheck.Take()
	var full leakcheck.Snapshot
	rounds := 0
	for {
		rounds++
		pods(strconv.Itoa(rounds), 400)
		full = leakcheck.Take()
		if full.HeapBytes-prev.HeapBytes < 2<<20 {
			break
		}
		if rounds == 30 {
			t.Fatalf("%d unread streams: the heap still grew by %.1f MiB in round %d of 1,200 events (%.1f MiB now): what a listener holds is not bounded",
				streams, float64(full.HeapBytes-prev.HeapBytes)/(1<<20), rounds, float64(full.HeapBytes)/(1<<20))
		}
		prev = full
	}
	perStream := (full.HeapBytes - idle.HeapBytes) / int64(streams)
	t.Logf("%d unread GetContainerEvents streams: the heap stopped growing after %d rounds of 1,200 events at %.1f MiB (%.1f MiB before the client connected): %d KiB a stream",
		streams, rounds, float64(full.HeapBytes)/(1<<20), float64(idle.HeapBytes)/(1<<20), perStream>>10)
	if full.Goroutines < idle.Goroutines+streams {
		t.Fatalf("%d goroutines with %d streams open: the streams ended early", full.Goroutines, streams)
	}
	if perStream > 512<<10 {
		t.Errorf("%d unread streams hold %d KiB each, bound 512 KiB", streams, perStream>>10)
	}
	cancel()
	conn.Close()
	leakcheck.Settle(t, idle, leakcheck.Tolerance{HeapBytes: 24 << 20}, 2*time.Minute)
}
