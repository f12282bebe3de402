package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/server"
	"github.com/plugsim/plugsim/internal/callfuzz"
)

// csiCodes are the codes the CSI spec documents for the errors of the calls below (its "Error
// Scheme" tables) plus the general ones; anything else, Unknown above all, is a bug.
var csiCodes = map[codes.Code]bool{
	codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.AlreadyExists: true,
	codes.FailedPrecondition: true, codes.ResourceExhausted: true, codes.OutOfRange: true,
	codes.Aborted: true, codes.Unimplemented: true, codes.DeadlineExceeded: true,
}

// csiProgram is criProgram's counterpart for CSI: each byte of prog picks a call, the next ones
// its target (a volume or snapshot handed out so far, or the fuzzed name) and its sizes.
type csiProgram struct {
	callfuzz.Program
	t     *testing.T
	id    csi.IdentityClient
	ctl   csi.ControllerClient
	node  csi.NodeClient
	path  string
	dir   string
	vols  []string
	snaps []string
}

// target is a path under the test's directory, or the fuzzed one (csi-fake's fake mounts only
// record it; a hostile one must be refused or recorded, never followed).
func (p *csiProgram) target() string {
	if p.Next()%3 == 0 {
		return p.path
	}
	return filepath.Join(p.dir, fmt.Sprintf("t%d", p.Next()%4))
}

func (p *csiProgram) size() int64 {
	switch b := p.Next(); b % 4 {
	case 0:
		return 0
	case 1:
		return int64(b) << 20
	case 2:
		return int64(b) << 56 // near MaxInt64
	default:
		return -int64(b)
	}
}

func (p *csiProgram) capability() *csi.VolumeCapability {
	modes := []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_UNKNOWN}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: modes[p.Next()%4]}}
	if p.Next()%2 == 0 {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: p.Str()}}
	}
	return c
}

func (p *csiProgram) step(ctx context.Context) {
	secrets := map[string]string{"password": p.Str()}
	switch p.Next() % 15 {
	case 0:
		r, err := p.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: p.Str(), CapacityRange: &csi.CapacityRange{RequiredBytes: p.size(), LimitBytes: p.size()},
			VolumeCapabilities: []*csi.VolumeCapability{p.capability()}, Parameters: map[string]string{p.Str(): p.Str()}, Secrets: secrets})
		callfuzz.Check(p.t, "CreateVolume", err, csiCodes)
		if err == nil {
			p.vols = append(p.vols, r.Volume.VolumeId)
		}
	case 1:
		_, err := p.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: p.Pick(p.vols), Secrets: secrets})
		callfuzz.Check(p.t, "DeleteVolume", err, csiCodes)
	case 2:
		_, err := p.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: p.Pick(p.vols), NodeId: "node-1",
			VolumeCapability: p.capability(), Readonly: p.Next()%2 == 0, Secrets: secrets})
		callfuzz.Check(p.t, "ControllerPublishVolume", err, csiCodes)
	case 3:
		_, err := p.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: p.Pick(p.vols), NodeId: "node-1"})
		callfuzz.Check(p.t, "ControllerUnpublishVolume", err, csiCodes)
	case 4:
		_, err := p.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: p.Pick(p.vols), StagingTargetPath: p.target(),
			VolumeCapability: p.capability(), Secrets: secrets})
		callfuzz.Check(p.t, "NodeStageVolume", err, csiCodes)
	case 5:
		_, err := p.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: p.Pick(p.vols), StagingTargetPath: p.target()})
		callfuzz.Check(p.t, "NodeUnstageVolume", err, csiCodes)
	case 6:
		_, err := p.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: p.Pick(p.vols), StagingTargetPath: p.target(),
			TargetPath: p.target(), VolumeCapability: p.capability(), Readonly: p.Next()%2 == 0, Secrets: secrets})
		callfuzz.Check(p.t, "NodePublishVolume", err, csiCodes)
	case 7:
		_, err := p.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: p.Pick(p.vols), TargetPath: p.target()})
		callfuzz.Check(p.t, "NodeUnpublishVolume", err, csiCodes)
	case 8:
		r, err := p.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: p.Pick(p.vols), Name: p.Str(), Secrets: secrets})
		callfuzz.Check(p.t, "CreateSnapshot", err, csiCodes)
		if err == nil {
			p.snaps = append(p.snaps, r.Snapshot.SnapshotId)
		}
	case 9:
		_, err := p.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: p.Pick(p.snaps), Secrets: secrets})
		callfuzz.Check(p.t, "DeleteSnapshot", err, csiCodes)
	case 10:
		_, err := p.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: p.Pick(p.vols),
			CapacityRange: &csi.CapacityRange{RequiredBytes: p.size(), LimitBytes: p.size()}, Secrets: secrets})
		callfuzz.Check(p.t, "ControllerExpandVolume", err, csiCodes)
	case 11:
		_, err := p.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: p.Pick(p.vols), VolumePath: p.target(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: p.size()}})
		callfuzz.Check(p.t, "NodeExpandVolume", err, csiCodes)
	case 12:
		_, err := p.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: p.Pick(p.vols), VolumePath: p.target()})
		callfuzz.Check(p.t, "NodeGetVolumeStats", err, csiCodes)
	case 13:
		src := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: p.Pick(p.snaps)}}}
		if p.Next()%2 == 0 {
			src = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: p.Pick(p.vols)}}}
		}
		r, err := p.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: p.Str(), VolumeContentSource: src,
			VolumeCapabilities: []*csi.VolumeCapability{p.capability()}})
		callfuzz.Check(p.t, "CreateVolume from a source", err, csiCodes)
		if err == nil {
			p.vols = append(p.vols, r.Volume.VolumeId)
		}
	case 14:
		_, err := p.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: int32(p.Next()) - 128, StartingToken: p.Str()})
		callfuzz.Check(p.t, "ListVolumes", err, csiCodes)
		_, err = p.ctl.GetCapacity(ctx, &csi.GetCapacityRequest{VolumeCapabilities: []*csi.VolumeCapability{p.capability()}})
		callfuzz.Check(p.t, "GetCapacity", err, csiCodes)
	}
}

// consistent: ListVolumes and ControllerGetVolume agree on every volume (and its published
// nodes); ListSnapshots and a lookup by ID agree; the capacity left is never negative or more
// than the whole.
func (p *csiProgram) consistent(ctx context.Context) {
	list, err := p.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		p.t.Fatalf("ListVolumes: %v", err)
	}
	listed := map[string]bool{}
	for _, e := range list.Entries {
		id := e.Volume.VolumeId
		listed[id] = true
		g, err := p.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
		if err != nil || g.Volume.VolumeId != id || g.Volume.CapacityBytes != e.Volume.CapacityBytes ||
			fmt.Sprint(g.GetStatus().GetPublishedNodeIds()) != fmt.Sprint(e.GetStatus().GetPublishedNodeIds()) {
			p.t.Fatalf("volume %s listed as %v, get answers %v %v", id, e, g, err)
		}
	}
	for _, id := range p.vols {
		if _, err := p.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id}); !listed[id] && status.Code(err) != codes.NotFound {
			p.t.Fatalf("volume %s not listed, get answers %v", id, err)
		}
	}
	snaps, err := p.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil {
		p.t.Fatalf("ListSnapshots: %v", err)
	}
	for _, e := range snaps.Entries {
		one, err := p.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: e.Snapshot.SnapshotId})
		if err != nil || len(one.Entries) != 1 || one.Entries[0].Snapshot.SourceVolumeId != e.Snapshot.SourceVolumeId {
			p.t.Fatalf("snapshot %s listed, by ID %v %v", e.Snapshot.SnapshotId, one, err)
		}
	}
	c, err := p.ctl.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil || c.AvailableCapacity < 0 || c.AvailableCapacity > fuzzCapacity {
		p.t.Fatalf("GetCapacity: %v %v", c, err)
	}
}

const fuzzCapacity = int64(1) << 40

// FuzzCSI runs random well-typed CSI call sequences (controller and node) against an in-process
// csi-fake and checks the invariants: no panic, every error a gRPC status with a code the spec
// documents, ListVolumes agreeing with ControllerGetVolume, the capacity in range, and nothing
// written outside the data directory.
func FuzzCSI(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 2, 0, 0, 0, 4, 0, 1, 0, 0, 6, 0, 1, 1, 0, 0, 8, 0, 1, 13, 0, 0, 0, 0, 0, 7, 0, 1, 5, 0, 1, 3, 0, 1, 0}, "pvc-1", "/etc")
	f.Add([]byte{0, 1, 2, 255, 2, 255, 0, 0, 10, 0, 2, 255, 2, 255, 11, 0, 2, 0xff, 0, 14, 200, 1, 0, 0}, "../../x", "../../../tmp")
	f.Add([]byte{0, 0, 1, 1, 1, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 1, 0}, "", "relative/path")
	f.Fuzz(func(t *testing.T, prog []byte, name, path string) {
		if len(prog) > 96 || len(name) > 512 || len(path) > 512 {
			return
		}
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		s, err := server.Start(server.Options{NodeID: "node-1", DataDir: data, Capacity: fuzzCapacity})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p := &csiProgram{t: t, id: csi.NewIdentityClient(conn), ctl: csi.NewControllerClient(conn), node: csi.NewNodeClient(conn),
			Program: callfuzz.Program{Prog: prog, Name: callfuzz.WireString(name)}, path: callfuzz.WireString(path), dir: filepath.Join(dir, "targets")}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for p.More() {
			p.step(ctx)
		}
		p.consistent(ctx)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if n := e.Name(); n != "data" && n != "targets" {
				t.Fatalf("%s written beside the data directory", n)
			}
		}
	})
}

// FuzzStateDir: csi-fake --state-dir starting on a state.json torn by a crash or edited by hand
// either refuses to start, naming the file, or starts with a consistent state and serves a volume
// lifecycle.
func FuzzStateDir(f *testing.F) {
	f.Add([]byte(`{"version":1,"nextSeq":3,"volumes":{"vol-1":{"id":"vol-1","name":"pvc-1","seq":1,"capacityBytes":1073741824,"accessType":"mount","published":{"node-1":{"accessMode":"SINGLE_NODE_WRITER"}}}},"snapshots":{"snap-1":{"id":"snap-1","sourceVolumeId":"vol-1","seq":2}},"node":{"vol-1":{"volumeId":"vol-1","stagingPath":"/s","targets":{"/t":{"accessType":"mount"}}}}}`))
	f.Add([]byte(`{"version":1,"volumes":{"a":{"id":"a","capacityBytes":9223372036854775807},"b":{"id":"b","capacityBytes":9223372036854775807}}}`))
	f.Add([]byte(`{"version":1,"snapshots":{"s":{"id":"s","sourceVolumeId":"gone"}},"node":{"x":{"volumeId":"y"}}}`))
	f.Fuzz(func(t *testing.T, file []byte) {
		dir := t.TempDir()
		stateDir := filepath.Join(dir, "data")
		os.MkdirAll(stateDir, 0o700)
		os.WriteFile(filepath.Join(stateDir, "state.json"), file, 0o600)
		s, err := server.Start(server.Options{NodeID: "node-1", StateDir: stateDir, Capacity: fuzzCapacity})
		if err != nil {
			if !strings.Contains(err.Error(), "state.json") {
				t.Fatalf("start refused without naming the file: %v", err)
			}
			return
		}
		defer s.Close()
		conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p := &csiProgram{t: t, id: csi.NewIdentityClient(conn), ctl: csi.NewControllerClient(conn), node: csi.NewNodeClient(conn),
			Program: callfuzz.Program{Prog: []byte{0, 1, 1, 0, 0, 2, 0, 0, 0, 4, 0, 1, 0, 0, 6, 0, 1, 1, 0, 0, 8, 0, 7, 0, 1, 5, 0, 1, 3, 0, 1, 1, 0},
				Name: "vol-1"}, path: "/t", dir: filepath.Join(dir, "targets")}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.consistent(ctx)
		for p.More() {
			p.step(ctx)
		}
		p.consistent(ctx)
	})
}
