package trace

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func TestCallerMetadataNamesTheCaller(t *testing.T) {
	rec, _ := New(Options{})
	ic := rec.UnaryServerInterceptor(Boundary{Interface: CSI, Caller: "kubelet", Callee: "csi-fake"})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/GetPluginInfo"}
	h := func(ctx context.Context, req any) (any, error) { return nil, nil }
	ic(context.Background(), nil, info, h)
	ic(metadata.NewIncomingContext(context.Background(), metadata.Pairs(CallerMetadata, "external-provisioner")), nil, info, h)
	evs := rec.Events()
	if len(evs) != 2 || evs[0].Caller != "kubelet" || evs[1].Caller != "external-provisioner" {
		t.Errorf("callers %q, %q; want kubelet (the boundary's) then external-provisioner (the client's)", evs[0].Caller, evs[1].Caller)
	}
}
