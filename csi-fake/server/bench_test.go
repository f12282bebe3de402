package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// emptyDriver answers the nine lifecycle RPCs with empty responses: the floor any CSI driver
// served over gRPC on a unix socket pays (marshalling, the socket, the HTTP/2 framing).
type emptyDriver struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
}

func (emptyDriver) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol"}}, nil
}
func (emptyDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}
func (emptyDriver) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{}, nil
}
func (emptyDriver) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
func (emptyDriver) NodeStageVolume(context.Context, *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	return &csi.NodeStageVolumeResponse{}, nil
}
func (emptyDriver) NodeUnstageVolume(context.Context, *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return &csi.NodeUnstageVolumeResponse{}, nil
}
func (emptyDriver) NodePublishVolume(context.Context, *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return &csi.NodePublishVolumeResponse{}, nil
}
func (emptyDriver) NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
func (emptyDriver) NodeGetVolumeStats(context.Context, *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return &csi.NodeGetVolumeStatsResponse{}, nil
}

func startEmpty(b *testing.B) string {
	sock := filepath.Join(b.TempDir(), "empty.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	csi.RegisterControllerServer(g, emptyDriver{})
	csi.RegisterNodeServer(g, emptyDriver{})
	go g.Serve(l)
	b.Cleanup(g.Stop)
	return "unix://" + sock
}

// lifecycle runs the volume lifecycle kubelet and the sidecars drive for one pod:
// CreateVolume → ControllerPublish → NodeStage → NodePublish → NodeGetVolumeStats →
// NodeUnpublish → NodeUnstage → ControllerUnpublish → DeleteVolume.
type lifecycle struct {
	cc              csi.ControllerClient
	nc              csi.NodeClient
	staging, target string
	n               int
}

func (l *lifecycle) run(ctx context.Context) error {
	l.n++
	v, err := l.cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-" + strconv.Itoa(l.n), VolumeCapabilities: []*csi.VolumeCapability{snw},
		CapacityRange: &csi.CapacityRange{RequiredBytes: gib}})
	if err != nil {
		return fmt.Errorf("CreateVolume: %w", err)
	}
	id := v.GetVolume().GetVolumeId()
	steps := []func() error{
		func() error {
			_, err := l.cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: snw})
			return err
		},
		func() error {
			_, err := l.nc.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: l.staging, VolumeCapability: snw})
			return err
		},
		func() error {
			_, err := l.nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: l.target, StagingTargetPath: l.staging, VolumeCapability: snw})
			return err
		},
		func() error {
			_, err := l.nc.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: l.target})
			return err
		},
		func() error {
			_, err := l.nc.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: l.target})
			return err
		},
		func() error {
			_, err := l.nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: l.staging})
			return err
		},
		func() error {
			_, err := l.cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
			return err
		},
		func() error {
			_, err := l.cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
			return err
		},
	}
	for i, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("lifecycle step %d: %w", i+2, err)
		}
	}
	return nil
}

// newLifecycle puts the CO's staging and target paths in dir.
func newLifecycle(b *testing.B, ep, dir string) *lifecycle {
	conn := dial(b, ep)
	os.MkdirAll(filepath.Join(dir, "staging"), 0o755)
	os.MkdirAll(filepath.Join(dir, "pods"), 0o755)
	return &lifecycle{cc: csi.NewControllerClient(conn), nc: csi.NewNodeClient(conn),
		staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "pods", "mount")}
}

// BenchmarkVolumeLifecycle runs the nine-call lifecycle against csi-fake (state in memory, trace
// ring and fault interceptors on, as a test would run it) and against the empty-handler floor,
// interleaved in the same loop so both see the same machine. It reports both and their ratio;
// the target is at most 1.2x the floor.
func BenchmarkVolumeLifecycle(b *testing.B) {
	for _, fs := range []struct{ name, dir string }{{"tmpfs", MemoryTempDir()}, {"disk", ""}} {
		b.Run(fs.name, func(b *testing.B) { benchLifecycle(b, fs.dir) })
	}
}

// benchLifecycle runs the comparison with the CO's paths (kubelet's pods and plugins
// directories) and, for "disk", csi-fake's data directory under base ("" is the default temp
// dir, a journaled disk here; MemoryTempDir is tmpfs).
func benchLifecycle(b *testing.B, base string) {
	dir, err := os.MkdirTemp(base, "csi-fake-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	// State in memory, so the data directory is tmpfs in both runs; only the CO's paths move.
	fake := start(b, Options{Endpoint: "unix://" + filepath.Join(dir, "csi.sock")})
	fl, ff := newLifecycle(b, startEmpty(b), filepath.Join(dir, "floor")), newLifecycle(b, fake.Endpoint(), filepath.Join(dir, "fake"))
	ctx := context.Background()
	for i := 0; i < 20; i++ { // warm up connections and caches
		if err := fl.run(ctx); err != nil {
			b.Fatal(err)
		}
		if err := ff.run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var floor, fakeD time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := fl.run(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := ff.run(ctx); err != nil {
			b.Fatal(err)
		}
		fakeD += time.Since(t1)
		floor += t1.Sub(t0)
	}
	b.StopTimer()
	fn, cn := float64(floor.Nanoseconds())/float64(b.N), float64(fakeD.Nanoseconds())/float64(b.N)
	b.ReportMetric(fn, "floor-ns/lifecycle")
	b.ReportMetric(cn, "csi-fake-ns/lifecycle")
	b.ReportMetric(cn/fn, "ratio")
	if b.N > 1 {
		fmt.Printf("%s: volume lifecycle (9 RPCs): empty-handler floor %.1fµs, csi-fake %.1fµs, ratio %.2fx (target <= 1.2x)\n", b.Name(), fn/1e3, cn/1e3, cn/fn)
	}
}

// BenchmarkStartUp measures what a Go test waits for before its first call: a driver started on a
// fresh socket, a client connected and the first call (Probe) answered; closing is outside the
// timing. csi-fake runs with its zero Options but a node ID (a temporary directory, state in
// memory, the trace and fault interceptors); csi-test's gomock driver, the usual CSI mock, as
// its users start it (driver.NewMockCSIDriver over gomock's Identity, Controller and Node mocks,
// StartOnAddress on a unix socket), with Probe expected. The ratio is the median of per-round
// ratios over interleaved rounds, as in cri-fake's BenchmarkStartUp.
func BenchmarkStartUp(b *testing.B) {
	dir := b.TempDir()
	servers := []struct {
		name  string
		start func(b *testing.B, i int) (ep string, stop func())
	}{
		{"csi-fake", func(b *testing.B, _ int) (string, func()) {
			s, err := Start(Options{NodeID: "node-1"})
			if err != nil {
				b.Fatal(err)
			}
			return s.Endpoint(), func() { s.Close() }
		}},
		{"csi-test-mock", func(b *testing.B, i int) (string, func()) {
			ctrl := gomock.NewController(b)
			identity := driver.NewMockIdentityServer(ctrl)
			identity.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(&csi.ProbeResponse{}, nil)
			d := driver.NewMockCSIDriver(&driver.MockCSIDriverServers{
				Identity: identity, Controller: driver.NewMockControllerServer(ctrl), Node: driver.NewMockNodeServer(ctrl),
			})
			sock := filepath.Join(dir, strconv.Itoa(i)+".sock")
			if err := d.StartOnAddress("unix", sock); err != nil {
				b.Fatal(err)
			}
			return "unix://" + sock, d.Stop
		}},
	}
	ctx := context.Background()
	n := 0
	once := func(b *testing.B, start func(*testing.B, int) (string, func())) time.Duration {
		n++
		t0 := time.Now()
		ep, stop := start(b, n)
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
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
		b.Run(srv.name, func(b *testing.B) {
			for range b.N {
				once(b, srv.start)
			}
		})
	}
	const rounds, perRound = 30, 20
	times := map[string][]float64{}
	for r := range rounds {
		for k := range servers {
			srv := servers[(r+k)%len(servers)]
			runtime.GC()
			var sum time.Duration
			for range perRound {
				sum += once(b, srv.start)
			}
			times[srv.name] = append(times[srv.name], float64(sum.Nanoseconds())/perRound)
		}
	}
	median := func(xs []float64) float64 {
		ys := slices.Clone(xs)
		slices.Sort(ys)
		return ys[len(ys)/2]
	}
	rs := make([]float64, rounds)
	for r := range rs {
		rs[r] = times["csi-fake"][r] / times["csi-test-mock"][r]
	}
	fmt.Printf("start-up to the first answered call (medians over %d interleaved rounds of %d): csi-fake %.2fms, csi-test gomock driver %.2fms; csi-fake/mock = %.2fx\n",
		rounds, perRound, median(times["csi-fake"])/1e6, median(times["csi-test-mock"])/1e6, median(rs))
}
