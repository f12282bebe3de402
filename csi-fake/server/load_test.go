package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/plugsim/plugsim/internal/leakcheck"
	"github.com/plugsim/plugsim/internal/loadtest"
)

// TestLoadVolumeLifecyclesLeaveNothing is issue 17's load against an in-process csi-fake: 64
// clients, each on its own connection with its own staging and target paths, run the volume
// lifecycle the sidecars and the kubelet drive at once (CreateVolume, ControllerPublishVolume,
// NodeStageVolume, NodePublishVolume, NodeGetVolumeStats and back: NodeUnpublishVolume,
// NodeUnstageVolume, ControllerUnpublishVolume, DeleteVolume). Every call must answer OK, no
// volume may be left listed, the data directory must hold the entries it had, and goroutines,
// open fds and heap must come back to their baseline: the one taken after a warm-up while the
// clients are connected (what each lifecycle leaves), then the one taken before any client
// connected, once they have gone (what each connection leaves). 1,000 lifecycles a client in
// `make soak` (PLUGSIM_LOAD_LIFECYCLES), a few in `go test`.
func TestLoadVolumeLifecyclesLeaveNothing(t *testing.T) {
	clients, lifecycles := loadtest.Size(t, 2)
	data, co := t.TempDir(), t.TempDir()
	s := start(t, Options{DataDir: data, Capacity: 1 << 60})
	// Heap for the trace ring (4,096 events, which the load fills) and the allocator's turnover;
	// no goroutine, no fd.
	tol := leakcheck.Tolerance{HeapBytes: 24 << 20}
	idle := leakcheck.Take()
	ctx := context.Background()
	conns := loadtest.Dial(t, s.Endpoint(), clients)
	run := func(round string, perClient int) []error {
		ls := make([]*lifecycle, len(conns))
		for w, conn := range conns {
			ls[w] = lifecycleOver(conn, filepath.Join(co, round, strconv.Itoa(w)), fmt.Sprintf("pvc-%s-%d-", round, w))
		}
		return loadtest.Run(t, conns, perClient, func(_ *grpc.ClientConn, w, _ int) error { return ls[w].run(ctx) })
	}
	if errs := run("warm", 1); len(errs) > 0 { // what starts once: the connections' transports
		t.Fatalf("warm-up: %d unexpected errors, first: %v", len(errs), errs[0])
	}
	dataEntries := loadtest.Entries(t, data)
	base := leakcheck.Take()
	begin := time.Now()
	errs := run("load", lifecycles)
	took := time.Since(begin)
	loadtest.Report(t, errs)
	vols, err := csi.NewControllerClient(conns[0]).ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(vols.Entries) != 0 {
		t.Fatalf("after the load: %d volumes listed (%v), want none", len(vols.GetEntries()), err)
	}
	if n := loadtest.Entries(t, data); n != dataEntries {
		t.Errorf("data dir holds %d entries after the load, %d before: a lifecycle left files behind", n, dataEntries)
	}
	loaded := leakcheck.Settle(t, base, tol, 2*time.Minute)
	loadtest.Close(conns)
	settled := leakcheck.Settle(t, idle, tol, 2*time.Minute)
	calls := clients * lifecycles * 9
	t.Logf("%d clients × %d volume lifecycles: %d calls, %d unexpected errors, %v (%.0f calls/s); "+
		"before: %v; after, clients connected: %v; before any client: %v; after, clients gone: %v",
		clients, lifecycles, calls, len(errs), took.Round(time.Millisecond), float64(calls)/took.Seconds(), base, loaded, idle, settled)
}
