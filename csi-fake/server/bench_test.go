package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc"

	"github.com/plugsim/plugsim/internal/startupbench"
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
	name            string // the volumes' names are name + a count
	n               int
}

func (l *lifecycle) run(ctx context.Context) error {
	l.n++
	v, err := l.cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: l.name + strconv.Itoa(l.n), VolumeCapabilities: []*csi.VolumeCapability{snw},
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
	return lifecycleOver(dial(b, ep), dir, "pvc-")
}

// lifecycleOver runs lifecycles over conn, with the CO's staging and target paths in dir and
// volumes named name + a count.
func lifecycleOver(conn *grpc.ClientConn, dir, name string) *lifecycle {
	os.MkdirAll(filepath.Join(dir, "staging"), 0o755)
	os.MkdirAll(filepath.Join(dir, "pods"), 0o755)
	return &lifecycle{cc: csi.NewControllerClient(conn), nc: csi.NewNodeClient(conn),
		staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "pods", "mount"), name: name}
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

// BenchmarkStartUp measures what a Go test waits for before its first call (package
// startupbench): csi-fake with its zero Options but a node ID (a temporary directory, state in
// memory, the trace and fault interceptors), against csi-test's gomock driver, the usual CSI mock,
// as its users start it (driver.NewMockCSIDriver over gomock's Identity, Controller and Node mocks,
// StartOnAddress on a unix socket), with Probe expected, in the same run.
func BenchmarkStartUp(b *testing.B) {
	dir := b.TempDir()
	n := 0
	startupbench.Compare(b,
		startupbench.Server{Name: "csi-fake", Start: func(b *testing.B) (string, func()) {
			s, err := Start(Options{NodeID: "node-1"})
			if err != nil {
				b.Fatal(err)
			}
			return s.Endpoint(), func() { s.Close() }
		}},
		startupbench.Server{Name: "csi-test-mock", Start: func(b *testing.B) (string, func()) {
			ctrl := gomock.NewController(b)
			identity := driver.NewMockIdentityServer(ctrl)
			identity.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(&csi.ProbeResponse{}, nil)
			d := driver.NewMockCSIDriver(&driver.MockCSIDriverServers{
				Identity: identity, Controller: driver.NewMockControllerServer(ctrl), Node: driver.NewMockNodeServer(ctrl),
			})
			n++
			sock := filepath.Join(dir, strconv.Itoa(n)+".sock")
			if err := d.StartOnAddress("unix", sock); err != nil {
				b.Fatal(err)
			}
			return "unix://" + sock, d.Stop
		}},
		func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
			return err
		})
}
