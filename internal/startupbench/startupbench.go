// Package startupbench is the start-up benchmark cri-fake's and csi-fake's servers share: how long a
// Go test waits before its first call (a server started on a fresh socket, a client connected, the
// first call answered; closing is outside the timing), for the fake and for the reference fake its
// users would otherwise start, in the same run.
//
// The ratio is the median of per-round ratios over interleaved rounds, the order rotating, so the
// drift of a shared machine cancels out. The sub-benchmarks' ns/op also count the world stops of
// StopTimer and StartTimer (runtime.ReadMemStats) around each close; the rounds do not.
package startupbench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Server is one side of the comparison.
type Server struct {
	Name string
	// Start starts a server and returns its endpoint and what stops it.
	Start func(b *testing.B) (ep string, stop func())
}

// Compare benchmarks fake and reference: each alone as a sub-benchmark, then in interleaved
// rounds, and prints their medians and the median ratio fake/reference. first makes the first
// call on a new connection (Version, Probe).
func Compare(b *testing.B, fake, reference Server, first func(context.Context, *grpc.ClientConn) error) {
	servers := []Server{fake, reference}
	ctx := context.Background()
	// once starts a server, makes the first call and returns the time that took, then closes it.
	once := func(b *testing.B, srv Server) time.Duration {
		t0 := time.Now()
		ep, stop := srv.Start(b)
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		if err := first(ctx, conn); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		b.StopTimer()
		conn.Close()
		stop()
		b.StartTimer()
		return took
	}
	for _, srv := range servers {
		b.Run(srv.Name, func(b *testing.B) {
			for range b.N {
				once(b, srv)
			}
		})
	}
	// Each round starts every server perRound times in turn, after a collection outside the
	// timing: the garbage a batch leaves is collected during the batch that made it, not the one
	// after it.
	const rounds, perRound = 30, 20
	times := map[string][]float64{}
	for r := range rounds {
		for k := range servers {
			srv := servers[(r+k)%len(servers)]
			runtime.GC()
			var sum time.Duration
			for range perRound {
				sum += once(b, srv)
			}
			times[srv.Name] = append(times[srv.Name], float64(sum.Nanoseconds())/perRound)
		}
	}
	rs := make([]float64, rounds)
	for r := range rs {
		rs[r] = times[fake.Name][r] / times[reference.Name][r]
	}
	fmt.Printf("start-up to the first answered call (medians over %d interleaved rounds of %d): %s %.2fms, %s %.2fms; %s/%s = %.2fx\n",
		rounds, perRound, fake.Name, median(times[fake.Name])/1e6, reference.Name, median(times[reference.Name])/1e6, fake.Name, reference.Name, median(rs))
}

func median(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[len(ys)/2]
}
