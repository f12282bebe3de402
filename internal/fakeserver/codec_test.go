package fakeserver

import (
	"bytes"
	"strings"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The codec encodes as gRPC's own does (the same bytes, decoded to the same message) in each of
// its three ways: a small message unpooled, one up to 1 MiB in a buffer of gRPC's pool, and a
// larger one in a buffer of its own, which nothing keeps once it is freed.
func TestWireCodec(t *testing.T) {
	for _, c := range []struct {
		name   string
		size   int
		pooled bool
	}{{"small", 100, false}, {"pooled", 100 << 10, true}, {"own", 3 << 20, false}} {
		m := &healthpb.HealthCheckRequest{Service: strings.Repeat("s", c.size)}
		data, err := wireCodec{}.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, _ := proto.Marshal(m)
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes encoded, not gRPC's %d", c.name, len(got), len(want))
		}
		_, own := data[0].(mem.SliceBuffer)
		if len(data) != 1 || own == c.pooled {
			t.Fatalf("%s: %d buffers, the first a %T (pooled: want %v)", c.name, len(data), data[0], c.pooled)
		}
		var back healthpb.HealthCheckRequest
		if err := (wireCodec{}).Unmarshal(data, &back); err != nil || !proto.Equal(&back, m) {
			t.Fatalf("%s: decoded %d bytes of service (%v)", c.name, len(back.Service), err)
		}
		data.Free()
	}
	if _, err := (wireCodec{}).Marshal("not a message"); err == nil {
		t.Fatal("a string was encoded")
	}
}
