// Package loadtest runs issue 17's load against an in-process fake: many clients, each on its own
// gRPC connection, running a lifecycle over and over at once, every unexpected error collected.
// The load suites of cri-fake and csi-fake (TestLoad* in their server packages) are built on it
// and on package leakcheck, which tells what the load left behind.
package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Size is the load: clients × lifecycles each. Issue 17's figure is 64 × 1,000 (`make soak`);
// `go test` runs 64 × short. PLUGSIM_LOAD_CLIENTS and PLUGSIM_LOAD_LIFECYCLES set them.
func Size(tb testing.TB, short int) (clients, lifecycles int) {
	tb.Helper()
	return Count(tb, "PLUGSIM_LOAD_CLIENTS", 64), Count(tb, "PLUGSIM_LOAD_LIFECYCLES", short)
}

// Count is the positive count the environment variable env gives (`make soak` sets the long
// forms' so), or short when it is unset; it fails tb on anything else.
func Count(tb testing.TB, env string, short int) int {
	tb.Helper()
	s := os.Getenv(env)
	if s == "" {
		return short
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive count", env, s)
	}
	return n
}

// Dial opens n connections to endpoint. The caller closes them (Close), so that it can check
// what closing them leaves; the test's cleanup closes any left open.
func Dial(tb testing.TB, endpoint string, n int) []*grpc.ClientConn {
	tb.Helper()
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c
	}
	tb.Cleanup(func() { Close(conns) })
	return conns
}

// Close closes the connections.
func Close(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// Run has one goroutine per connection call lifecycle perClient times (client is the
// connection's index, i the lifecycle's) and returns the errors, each naming its client and
// lifecycle. A long run logs its progress at every tenth of its lifecycles.
func Run(tb testing.TB, conns []*grpc.ClientConn, perClient int, lifecycle func(conn *grpc.ClientConn, client, i int) error) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	total := len(conns) * perClient
	var done atomic.Int64
	for w, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				err := lifecycle(conn, w, i)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("client %d lifecycle %d: %w", w, i, err))
					mu.Unlock()
				}
				if n := done.Add(1); total >= 10_000 && n%int64(total/10) == 0 {
					mu.Lock()
					tb.Logf("%d of %d lifecycles done, %d unexpected errors", n, total, len(errs))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// Report fails tb with the first ten errors and how many more there were.
func Report(tb testing.TB, errs []error) {
	tb.Helper()
	for i, err := range errs {
		if i == 10 {
			tb.Errorf("... and %d more unexpected errors", len(errs)-10)
			return
		}
		tb.Error(err)
	}
}

// Entries counts the files and directories under dir (dir itself among them).
func Entries(tb testing.TB, dir string) int {
	tb.Helper()
	n := 0
	if err := filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil }); err != nil {
		tb.Fatal(err)
	}
	return n
}
