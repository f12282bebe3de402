package trace_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

// BenchmarkInterceptorOverhead is what every served call pays for being traced and open to fault
// injection, the way the fakes chain the two (trace outermost), against calling the handler
// directly. The fakes' own lifecycle benchmarks show it in context.
func BenchmarkInterceptorOverhead(b *testing.B) {
	rec, err := trace.New(trace.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// As cri-fake builds it: the fault rules run inside the trace interceptor.
	tr := rec.UnaryServerInterceptorWith(trace.Boundary{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake"}, faults.NewSet(0))
	info := &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.RuntimeService/ContainerStatus"}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("user-agent", "grpc-go/1.85", "content-type", "application/grpc"))
	req := &runtimeapi.ContainerStatusRequest{ContainerId: "abc"}
	resp := &runtimeapi.ContainerStatusResponse{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			handler(ctx, req)
		}
	})
	b.Run("trace+faults", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr(ctx, req, info, handler)
		}
	})
}
