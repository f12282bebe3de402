package trace

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRelistTraced is what the trace adds to a relist of 10,000 sandboxes (about 1 MB
// answered, each sandbox with its labels), beside what gRPC's codec pays to size and encode the
// whole answer anyway: the trace's share is what the call pays for being traced.
func BenchmarkRelistTraced(b *testing.B) {
	r, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	resp := sandboxes(10_000)
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			proto.Marshal(resp)
		}
	})
	b.Run("trace", func(b *testing.B) {
		for b.Loop() {
			serve(b, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, resp)
		}
	})
}
