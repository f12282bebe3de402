package runtime

import (
	"context"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

// Timeouts in seconds a client gives (issue 17): seconds × time.Second wraps past
// 9,223,372,036 s, to a negative Duration (an immediate timeout) or a short positive one.
// Such a timeout means no timeout, as 0 does for ExecSync.
func TestHugeTimeouts(t *testing.T) {
	huge := []int64{
		9_223_372_037,  // the first that wraps: negative
		math.MaxInt64,  // wraps to -1s
		18_446_744_074, // wraps to +0.29 s
		1 << 54,        // wraps to math.MinInt64
	}
	t.Run("ExecSync", func(t *testing.T) {
		s := newService(t, func(o *Options) { o.Launcher = deadlineLauncher{} })
		id := createContainer(t, s, runPod(t, s, "p"), "c")
		startContainer(t, s, id)
		for _, tc := range []struct {
			timeout int64
			want    string
		}{
			{huge[0], "no deadline"}, {huge[1], "no deadline"}, {huge[2], "no deadline"}, {huge[3], "no deadline"},
			{0, "no deadline"}, {-5, "no deadline"},
			{9_223_372_036, "deadline in 2562047h47m16s"}, {60, "deadline in 1m0s"},
		} {
			resp, err := s.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"deadline"}, Timeout: tc.timeout})
			if err != nil || string(resp.GetStdout()) != tc.want {
				t.Errorf("ExecSync with timeout %d s: %q, %v; want %q", tc.timeout, resp.GetStdout(), err, tc.want)
			}
		}
	})

	// StopContainer with a huge timeout waits for the process (here one that ignores its stop
	// signal) without a kill timer: the caller's deadline ends the call, and no SIGKILL was sent.
	for _, timeout := range huge {
		t.Run(fmt.Sprintf("StopContainer/%d", timeout), func(t *testing.T) {
			l := stubbornLauncher{procs: make(chan *stubbornProcess, 1)}
			s := newService(t, func(o *Options) { o.Launcher = l })
			id := createContainer(t, s, runPod(t, s, "p"), "c")
			startContainer(t, s, id)
			p := <-l.procs
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout})
			wantCode(t, err, codes.DeadlineExceeded)
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.sigs) != 1 || p.sigs[0] != syscall.SIGTERM {
				t.Errorf("timeout %d s: signals %v, want [SIGTERM] (no kill before the timeout)", timeout, p.sigs)
			}
		})
	}
}

func TestTimeoutSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want time.Duration
		ok   bool
	}{
		{0, 0, false},
		{-1, 0, false},
		{math.MinInt64, 0, false},
		{1, time.Second, true},
		{9_223_372_036, 9_223_372_036 * time.Second, true},
		{9_223_372_037, 0, false},
		{math.MaxInt64, 0, false},
	} {
		if got, ok := timeoutSeconds(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("timeoutSeconds(%d) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// deadlineLauncher starts processes whose ExecSync reports the deadline it was given, rounded up
// to the second (the call has consumed a little of it).
type deadlineLauncher struct{ UntilStopped }

type deadlineProcess struct{ *execProcess }

func (deadlineLauncher) Start(context.Context, task.Spec) (task.Task, error) {
	return deadlineProcess{&execProcess{done: make(chan struct{})}}, nil
}

func (deadlineProcess) ExecSync(ctx context.Context, _ []string) (task.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return task.ExecResult{}, err
	}
	d, ok := ctx.Deadline()
	if !ok {
		return task.ExecResult{Stdout: []byte("no deadline")}, nil
	}
	return task.ExecResult{Stdout: []byte(fmt.Sprintf("deadline in %v", time.Until(d).Round(time.Second)))}, nil
}
