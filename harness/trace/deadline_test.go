package trace

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// deadlineCtx is a context whose deadline is set apart from whether it is done, to put the
// server's view of a call in each state the race between the client's RST_STREAM and the server's
// deadline timer can leave it in.
type deadlineCtx struct {
	context.Context
	deadline time.Time
	has      bool
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, c.has }

func TestCutByDeadline(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	end := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		start    time.Duration // before end
		deadline time.Duration // after end
		noDL     bool
		want     bool
	}{
		{"deadline already past", canceled, 500 * ms, -ms, false, true},
		{"deadline a little ahead (the header's lag)", canceled, 500 * ms, 10 * ms, false, true},
		{"canceled early in a long call", canceled, time.Second, 5 * time.Second, false, false},
		{"beyond the slack's bound", canceled, 10 * time.Second, 300 * ms, false, false},
		{"within half the call's time", canceled, 50 * ms, 40 * ms, false, true},
		{"in the first half of the call's time", canceled, 50 * ms, 60 * ms, false, false},
		{"no deadline", canceled, 500 * ms, 0, true, false},
		{"context not done: the Canceled came from elsewhere", context.Background(), 500 * ms, -ms, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := deadlineCtx{Context: tc.ctx, deadline: end.Add(tc.deadline), has: !tc.noDL}
			if got := cutByDeadline(ctx, end.Add(-tc.start), end); got != tc.want {
				t.Errorf("cutByDeadline = %v, want %v", got, tc.want)
			}
		})
	}
}

// waitServer answers Version and ends GetContainerEvents only when the call's context ends, with
// the context's error, as a handler waiting out an injected delay does.
type waitServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	started chan struct{}
}

func (s waitServer) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	s.signal()
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (s waitServer) GetContainerEvents(_ *runtimeapi.GetEventsRequest, ss grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	s.signal()
	<-ss.Context().Done()
	return status.FromContextError(ss.Context().Err()).Err()
}

func (s waitServer) signal() {
	select {
	case s.started <- struct{}{}:
	default:
	}
}

// A call the client's deadline cuts is recorded as DeadlineExceeded every time, though the
// server's context is mostly canceled by the client's RST_STREAM before its own deadline fires
// (8 to 9 of 10 calls before the fix); a call the client cancels stays Canceled.
func TestDeadlineCutCallsAreTracedAsDeadlineExceeded(t *testing.T) {
	rec, _ := New(Options{})
	b := Boundary{CRI, "kubelet", "cri-fake"}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(rec.UnaryServerInterceptor(b)), grpc.StreamInterceptor(rec.StreamServerInterceptor(b)))
	ws := waitServer{started: make(chan struct{}, 1)}
	runtimeapi.RegisterRuntimeServiceServer(srv, ws)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///buf", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := runtimeapi.NewRuntimeServiceClient(conn)

	// next waits for the next recorded event: the server records the call after the client has
	// returned. (A call whose header reached the server after its deadline is refused by grpc-go
	// before any interceptor and records nothing; the 500 ms deadline leaves room for a slow
	// machine.)
	events, unsubscribe := rec.Subscribe(32)
	t.Cleanup(unsubscribe)
	next := func(what string) Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no event recorded in 30s", what)
			return Event{}
		}
	}

	const runs = 20
	const timeout = 500 * time.Millisecond
	for i := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := c.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("run %d: the client got %v", i, err)
		}
		if ev := next(fmt.Sprint("run ", i)); ev.Code != "DeadlineExceeded" || ev.Error != "context deadline exceeded" {
			t.Errorf("run %d: traced %s %q, want DeadlineExceeded", i, ev.Code, ev.Error)
		}
	}
	// The streams run one after another, as the unary calls do: 20 side by side on a loaded
	// two-core machine under -race had their headers parsed hundreds of milliseconds late, which
	// pushed the server's deadline that far past the client's, beyond the slack (a trace of
	// concurrent deadline-cut streams can then say Canceled; see deadlineSlack).
	for i := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		s, err := c.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("stream %d: the client got %v", i, err)
		}
		if ev := next(fmt.Sprint("stream ", i)); ev.Code != "DeadlineExceeded" {
			t.Errorf("stream %d: traced %s %q, want DeadlineExceeded", i, ev.Code, ev.Error)
		}
	}

	// Canceled by the client long before its deadline: Canceled.
	for len(ws.started) > 0 {
		<-ws.started
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	go func() { <-ws.started; cancel() }()
	if _, err := c.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("canceled call: the client got %v", err)
	}
	if ev := next("canceled call"); ev.Code != "Canceled" {
		t.Errorf("canceled call traced %s %q, want Canceled", ev.Code, ev.Error)
	}
}
