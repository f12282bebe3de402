package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugsim/plugsim/csi-fake/state"
)

const (
	node = "node-1"
	gib  = int64(1) << 30
)

var ctx = context.Background()

func newTestDriver(t testing.TB, mut func(*Config)) *Driver {
	t.Helper()
	cfg := Config{
		NodeID: node, DataDir: t.TempDir(), AttachRequired: true,
		MaxVolumesPerNode: 3, Capacity: 100 * gib, KnownNodes: []string{"node-*"},
	}
	if mut != nil {
		mut(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
}

var (
	snw  = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	snmw = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)
)

func createReq(name string, size int64, caps ...*csi.VolumeCapability) *csi.CreateVolumeRequest {
	if len(caps) == 0 {
		caps = []*csi.VolumeCapability{snw}
	}
	return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: caps,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Parameters: map[string]string{"kind": "fast"}}
}

// must(call(...))(t) returns the call's result and fails the test on an error.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// fixture is a driver with one volume attached, staged and published, a snapshot and a group
// snapshot, the state most error cases start from.
type fixture struct {
	d                      *Driver
	vol, idle, snap, group string
	groupSnaps             []string
	staging, target        string
	pods                   string
}

func newFixture(t testing.TB, mut func(*Config)) *fixture {
	t.Helper()
	f := &fixture{d: newTestDriver(t, mut)}
	dir := t.TempDir()
	f.staging, f.pods = filepath.Join(dir, "staging"), filepath.Join(dir, "pods")
	f.target = filepath.Join(f.pods, "target")
	for _, p := range []string{f.staging, f.pods} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.vol = must(f.d.CreateVolume(ctx, createReq("vol-a", gib)))(t).GetVolume().GetVolumeId()
	f.idle = must(f.d.CreateVolume(ctx, createReq("vol-idle", gib)))(t).GetVolume().GetVolumeId()
	must(f.d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: node, VolumeCapability: snw}))(t)
	must(f.d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging, VolumeCapability: snw}))(t)
	must(f.d.NodePublishVolume(ctx, f.publishReq(f.vol, f.target)))(t)
	f.snap = must(f.d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: f.vol}))(t).GetSnapshot().GetSnapshotId()
	g := must(f.d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group-a", SourceVolumeIds: []string{f.vol, f.idle}}))(t).GetGroupSnapshot()
	f.group = g.GetGroupSnapshotId()
	for _, s := range g.GetSnapshots() {
		f.groupSnaps = append(f.groupSnaps, s.GetSnapshotId())
	}
	return f
}

func (f *fixture) publishReq(vol, target string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: target, StagingTargetPath: f.staging, VolumeCapability: snw}
}

func call[T any](_ T, err error) error { return err }

// TestErrorCodes is the table of every RPC's error cases, each with the code the spec (or
// csi-sanity) requires.
func TestErrorCodes(t *testing.T) {
	f := newFixture(t, nil)
	d := f.d
	bigVol := must(d.CreateVolume(ctx, createReq("vol-big", 50*gib)))(t).GetVolume().GetVolumeId()
	_ = bigVol
	big := must(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-big", SourceVolumeId: bigVol}))(t).GetSnapshot().GetSnapshotId()

	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		// CreateVolume
		{"CreateVolume/no name", func() error {
			return call(d.CreateVolume(ctx, &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{snw}}))
		}, codes.InvalidArgument},
		{"CreateVolume/no capabilities", func() error { return call(d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x"})) }, codes.InvalidArgument},
		{"CreateVolume/no access mode", func() error {
			return call(d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{{AccessType: snw.AccessType}}}))
		}, codes.InvalidArgument},
		{"CreateVolume/no access type", func() error {
			return call(d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: snw.AccessMode}}}))
		}, codes.InvalidArgument},
		{"CreateVolume/mixed mount and block", func() error {
			return call(d.CreateVolume(ctx, createReq("x", gib, snw, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))))
		}, codes.InvalidArgument},
		{"CreateVolume/required above limit", func() error {
			r := createReq("x", 2*gib)
			r.CapacityRange.LimitBytes = gib
			return call(d.CreateVolume(ctx, r))
		}, codes.InvalidArgument},
		{"CreateVolume/negative size", func() error { return call(d.CreateVolume(ctx, createReq("x", -1))) }, codes.InvalidArgument},
		{"CreateVolume/same name other size", func() error {
			r := createReq("vol-a", 2*gib)
			r.CapacityRange.LimitBytes = 2 * gib
			return call(d.CreateVolume(ctx, r))
		}, codes.AlreadyExists},
		{"CreateVolume/same name other parameters", func() error {
			r := createReq("vol-a", gib)
			r.Parameters = map[string]string{"kind": "slow"}
			return call(d.CreateVolume(ctx, r))
		}, codes.AlreadyExists},
		{"CreateVolume/same name other access mode", func() error {
			return call(d.CreateVolume(ctx, createReq("vol-a", gib, mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))))
		}, codes.AlreadyExists},
		{"CreateVolume/same name block", func() error {
			return call(d.CreateVolume(ctx, createReq("vol-a", gib, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))))
		}, codes.AlreadyExists},
		{"CreateVolume/missing snapshot", func() error {
			r := createReq("x", gib)
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "nope"}}}
			return call(d.CreateVolume(ctx, r))
		}, codes.NotFound},
		{"CreateVolume/missing source volume", func() error {
			r := createReq("x", gib)
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "nope"}}}
			return call(d.CreateVolume(ctx, r))
		}, codes.NotFound},
		{"CreateVolume/empty content source", func() error {
			r := createReq("x", gib)
			r.VolumeContentSource = &csi.VolumeContentSource{}
			return call(d.CreateVolume(ctx, r))
		}, codes.InvalidArgument},
		{"CreateVolume/smaller than snapshot", func() error {
			r := createReq("x", gib)
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: big}}}
			return call(d.CreateVolume(ctx, r))
		}, codes.OutOfRange},
		{"CreateVolume/block from mount snapshot", func() error {
			r := createReq("x", gib, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: f.snap}}}
			return call(d.CreateVolume(ctx, r))
		}, codes.InvalidArgument},
		{"CreateVolume/capacity exhausted", func() error { return call(d.CreateVolume(ctx, createReq("x", 60*gib))) }, codes.ResourceExhausted},
		{"CreateVolume/unknown mutable parameter", func() error {
			r := createReq("x", gib)
			r.MutableParameters = map[string]string{"XXX_FakeKey": "v"}
			return call(d.CreateVolume(ctx, r))
		}, codes.InvalidArgument},
		{"CreateVolume/bad tier", func() error {
			r := createReq("x", gib)
			r.MutableParameters = map[string]string{"tier": "gold"}
			return call(d.CreateVolume(ctx, r))
		}, codes.InvalidArgument},
		{"CreateVolume/topology not served", func() error {
			r := createReq("x", gib)
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{NodeTopologyKey: "elsewhere"}}}}
			return call(d.CreateVolume(ctx, r))
		}, codes.ResourceExhausted},
		// DeleteVolume
		{"DeleteVolume/no id", func() error { return call(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})) }, codes.InvalidArgument},
		{"DeleteVolume/unknown id", func() error { return call(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "nope"})) }, codes.OK},
		{"DeleteVolume/published", func() error { return call(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: f.vol})) }, codes.FailedPrecondition},
		// ControllerPublishVolume
		{"ControllerPublish/no volume id", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{NodeId: node, VolumeCapability: snw}))
		}, codes.InvalidArgument},
		{"ControllerPublish/no node id", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.idle, VolumeCapability: snw}))
		}, codes.InvalidArgument},
		{"ControllerPublish/no capability", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.idle, NodeId: node}))
		}, codes.InvalidArgument},
		{"ControllerPublish/unknown volume", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "nope", NodeId: node, VolumeCapability: snw}))
		}, codes.NotFound},
		{"ControllerPublish/unknown node", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.idle, NodeId: "stranger", VolumeCapability: snw}))
		}, codes.NotFound},
		{"ControllerPublish/readonly differs", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: node, VolumeCapability: snw, Readonly: true}))
		}, codes.AlreadyExists},
		{"ControllerPublish/single node volume on a second node", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: "node-2", VolumeCapability: snw}))
		}, codes.FailedPrecondition},
		{"ControllerPublish/block capability on mount volume", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.idle, NodeId: node, VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}))
		}, codes.FailedPrecondition},
		// ControllerUnpublishVolume
		{"ControllerUnpublish/no volume id", func() error {
			return call(d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{NodeId: node}))
		}, codes.InvalidArgument},
		{"ControllerUnpublish/unknown volume", func() error {
			return call(d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "nope", NodeId: node}))
		}, codes.OK},
		{"ControllerUnpublish/still staged on the node", func() error {
			return call(d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: f.vol, NodeId: node}))
		}, codes.FailedPrecondition},
		// ValidateVolumeCapabilities
		{"Validate/no id", func() error {
			return call(d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeCapabilities: []*csi.VolumeCapability{snw}}))
		}, codes.InvalidArgument},
		{"Validate/no capabilities", func() error {
			return call(d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: f.vol}))
		}, codes.InvalidArgument},
		{"Validate/unknown volume", func() error {
			return call(d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "nope", VolumeCapabilities: []*csi.VolumeCapability{snw}}))
		}, codes.NotFound},
		// ListVolumes, GetCapacity
		{"ListVolumes/invalid token", func() error { return call(d.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "invalid-token"})) }, codes.Aborted},
		{"ListVolumes/token never issued", func() error { return call(d.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "999999"})) }, codes.Aborted},
		{"ListVolumes/negative max_entries", func() error { return call(d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: -1})) }, codes.InvalidArgument},
		{"GetCapacity/ok", func() error { return call(d.GetCapacity(ctx, &csi.GetCapacityRequest{})) }, codes.OK},
		// ControllerExpandVolume
		{"ControllerExpand/no id", func() error {
			return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}))
		}, codes.InvalidArgument},
		{"ControllerExpand/no range", func() error {
			return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: f.vol}))
		}, codes.InvalidArgument},
		{"ControllerExpand/unknown volume", func() error {
			return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "nope", CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}))
		}, codes.NotFound},
		{"ControllerExpand/beyond capacity", func() error {
			return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: f.vol, CapacityRange: &csi.CapacityRange{RequiredBytes: 200 * gib}}))
		}, codes.OutOfRange},
		// ControllerGetVolume, ControllerModifyVolume, health
		{"ControllerGetVolume/no id", func() error { return call(d.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{})) }, codes.InvalidArgument},
		{"ControllerGetVolume/unknown", func() error {
			return call(d.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "nope"}))
		}, codes.NotFound},
		{"ControllerModify/no id", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{MutableParameters: map[string]string{"iops": "5"}}))
		}, codes.InvalidArgument},
		{"ControllerModify/no parameters", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: f.vol}))
		}, codes.InvalidArgument},
		{"ControllerModify/unknown key", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: f.vol, MutableParameters: map[string]string{"XXX_FakeKey": "v"}}))
		}, codes.InvalidArgument},
		{"ControllerModify/bad iops", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: f.vol, MutableParameters: map[string]string{"iops": "-3"}}))
		}, codes.InvalidArgument},
		{"ControllerModify/unknown volume", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: "nope", MutableParameters: map[string]string{"iops": "5"}}))
		}, codes.NotFound},
		{"ControllerGetVolumeHealth/no id", func() error { return call(d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{})) }, codes.InvalidArgument},
		{"ControllerGetVolumeHealth/unknown", func() error {
			return call(d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: "nope"}))
		}, codes.NotFound},
		{"ControllerListVolumeHealth/invalid token", func() error {
			return call(d.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{StartingToken: "x"}))
		}, codes.Aborted},
		// Snapshots
		{"CreateSnapshot/no name", func() error { return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: f.vol})) }, codes.InvalidArgument},
		{"CreateSnapshot/no source", func() error { return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s"})) }, codes.InvalidArgument},
		{"CreateSnapshot/unknown source", func() error {
			return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "nope"}))
		}, codes.NotFound},
		{"CreateSnapshot/same name other source", func() error {
			return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: f.idle}))
		}, codes.AlreadyExists},
		{"CreateSnapshot/topology not served", func() error {
			return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: f.vol,
				AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{NodeTopologyKey: "elsewhere"}}}}}))
		}, codes.ResourceExhausted},
		{"DeleteSnapshot/no id", func() error { return call(d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{})) }, codes.InvalidArgument},
		{"DeleteSnapshot/unknown", func() error { return call(d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "nope"})) }, codes.OK},
		{"DeleteSnapshot/group member", func() error {
			return call(d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: f.groupSnaps[0]}))
		}, codes.InvalidArgument},
		{"ListSnapshots/invalid token", func() error {
			return call(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "invalid-token"}))
		}, codes.Aborted},
		{"ListSnapshots/unknown id is empty", func() error { return call(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "nope"})) }, codes.OK},
		{"GetSnapshot/no id", func() error { return call(d.GetSnapshot(ctx, &csi.GetSnapshotRequest{})) }, codes.InvalidArgument},
		{"GetSnapshot/unknown", func() error { return call(d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: "nope"})) }, codes.NotFound},
		// Group snapshots
		{"CreateGroup/no name", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: []string{f.vol}}))
		}, codes.InvalidArgument},
		{"CreateGroup/no volumes", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g"}))
		}, codes.InvalidArgument},
		{"CreateGroup/volume twice", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{f.vol, f.vol}}))
		}, codes.InvalidArgument},
		{"CreateGroup/unknown volume", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{f.vol, "nope"}}))
		}, codes.NotFound},
		{"CreateGroup/same name other volumes", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group-a", SourceVolumeIds: []string{f.vol}}))
		}, codes.AlreadyExists},
		{"GetGroup/no id", func() error { return call(d.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{})) }, codes.InvalidArgument},
		{"GetGroup/unknown", func() error {
			return call(d.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "nope"}))
		}, codes.NotFound},
		{"GetGroup/snapshot list mismatch", func() error {
			return call(d.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: f.group, SnapshotIds: []string{f.snap}}))
		}, codes.InvalidArgument},
		{"DeleteGroup/no id", func() error { return call(d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{})) }, codes.InvalidArgument},
		{"DeleteGroup/unknown", func() error {
			return call(d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "nope"}))
		}, codes.OK},
		{"DeleteGroup/snapshot list mismatch", func() error {
			return call(d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: f.group, SnapshotIds: []string{f.snap}}))
		}, codes.InvalidArgument},
		// NodeStageVolume
		{"NodeStage/no volume id", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{StagingTargetPath: f.staging, VolumeCapability: snw}))
		}, codes.InvalidArgument},
		{"NodeStage/no staging path", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, VolumeCapability: snw}))
		}, codes.InvalidArgument},
		{"NodeStage/no capability", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging}))
		}, codes.InvalidArgument},
		{"NodeStage/unknown volume", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "nope", StagingTargetPath: f.staging, VolumeCapability: snw}))
		}, codes.NotFound},
		{"NodeStage/not attached", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.idle, StagingTargetPath: f.staging, VolumeCapability: snw}))
		}, codes.FailedPrecondition},
		{"NodeStage/staged elsewhere", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging + "2", VolumeCapability: snw}))
		}, codes.FailedPrecondition},
		{"NodeStage/same path other mode", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging, VolumeCapability: snmw}))
		}, codes.AlreadyExists},
		// NodeUnstageVolume
		{"NodeUnstage/no volume id", func() error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: f.staging}))
		}, codes.InvalidArgument},
		{"NodeUnstage/no staging path", func() error { return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: f.vol})) }, codes.InvalidArgument},
		{"NodeUnstage/unknown volume", func() error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "nope", StagingTargetPath: f.staging}))
		}, codes.NotFound},
		{"NodeUnstage/known but not staged", func() error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: f.idle, StagingTargetPath: f.staging}))
		}, codes.OK},
		{"NodeUnstage/still published", func() error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging}))
		}, codes.FailedPrecondition},
		// NodePublishVolume
		{"NodePublish/no volume id", func() error { return call(d.NodePublishVolume(ctx, f.publishReq("", f.target))) }, codes.InvalidArgument},
		{"NodePublish/no target", func() error { return call(d.NodePublishVolume(ctx, f.publishReq(f.vol, ""))) }, codes.InvalidArgument},
		{"NodePublish/no capability", func() error {
			r := f.publishReq(f.vol, f.target)
			r.VolumeCapability = nil
			return call(d.NodePublishVolume(ctx, r))
		}, codes.InvalidArgument},
		{"NodePublish/no staging path", func() error {
			r := f.publishReq(f.vol, f.target)
			r.StagingTargetPath = ""
			return call(d.NodePublishVolume(ctx, r))
		}, codes.FailedPrecondition},
		{"NodePublish/unknown volume", func() error { return call(d.NodePublishVolume(ctx, f.publishReq("nope", f.target))) }, codes.NotFound},
		{"NodePublish/not staged", func() error { return call(d.NodePublishVolume(ctx, f.publishReq(f.idle, f.pods+"/idle"))) }, codes.FailedPrecondition},
		{"NodePublish/same target readonly differs", func() error {
			r := f.publishReq(f.vol, f.target)
			r.Readonly = true
			return call(d.NodePublishVolume(ctx, r))
		}, codes.AlreadyExists},
		{"NodePublish/second target of a single-writer volume", func() error {
			return call(d.NodePublishVolume(ctx, f.publishReq(f.vol, f.pods+"/second")))
		}, codes.FailedPrecondition},
		{"NodePublish/parent missing", func() error { return call(d.NodePublishVolume(ctx, f.publishReq(f.vol, f.pods+"/no/such/dir"))) }, codes.FailedPrecondition},
		{"NodePublish/ephemeral with a persistent volume's id", func() error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: f.idle, TargetPath: f.pods + "/e", VolumeCapability: snw,
				VolumeContext: map[string]string{ContextEphemeral: "true"}}))
		}, codes.AlreadyExists},
		{"NodePublish/ephemeral bad size", func() error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "eph-x", TargetPath: f.pods + "/e", VolumeCapability: snw,
				VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "lots"}}))
		}, codes.InvalidArgument},
		// NodeUnpublishVolume
		{"NodeUnpublish/no volume id", func() error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: f.target}))
		}, codes.InvalidArgument},
		{"NodeUnpublish/no target", func() error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: f.vol}))
		}, codes.InvalidArgument},
		{"NodeUnpublish/unknown volume", func() error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "nope", TargetPath: f.target}))
		}, codes.NotFound},
		{"NodeUnpublish/not published there", func() error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: f.vol, TargetPath: f.pods + "/other"}))
		}, codes.OK},
		// NodeGetVolumeStats, NodeExpandVolume, node health
		{"NodeStats/no volume id", func() error {
			return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumePath: f.target}))
		}, codes.InvalidArgument},
		{"NodeStats/no path", func() error { return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.vol})) }, codes.InvalidArgument},
		{"NodeStats/unknown volume", func() error {
			return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "nope", VolumePath: f.target}))
		}, codes.NotFound},
		{"NodeStats/not published at path", func() error {
			return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.vol, VolumePath: "some/path"}))
		}, codes.NotFound},
		{"NodeExpand/no volume id", func() error { return call(d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumePath: f.target})) }, codes.InvalidArgument},
		{"NodeExpand/no path", func() error { return call(d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: f.vol})) }, codes.InvalidArgument},
		{"NodeExpand/unknown volume", func() error {
			return call(d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "nope", VolumePath: "some/path"}))
		}, codes.NotFound},
		{"NodeGetVolumeHealth/no id", func() error { return call(d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{})) }, codes.InvalidArgument},
		{"NodeGetVolumeHealth/unknown", func() error {
			return call(d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: "nope"}))
		}, codes.NotFound},
		// SnapshotMetadata is deliberately not served.
		{"GetMetadataAllocated/unimplemented", func() error { return d.GetMetadataAllocated(&csi.GetMetadataAllocatedRequest{}, nil) }, codes.Unimplemented},
		{"GetMetadataDelta/unimplemented", func() error { return d.GetMetadataDelta(&csi.GetMetadataDeltaRequest{}, nil) }, codes.Unimplemented},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if err != nil && status.Convert(err).Message() == "" {
				t.Fatalf("error without a message")
			}
		})
	}
}

// TestModes checks that a process answers Unimplemented (with a reason) for the services its mode
// leaves to another process.
func TestModes(t *testing.T) {
	ctrl := newTestDriver(t, func(c *Config) { c.Mode = ModeController })
	nodeOnly := newTestDriver(t, func(c *Config) { c.Mode = ModeNode })
	eph := newTestDriver(t, func(c *Config) { c.EphemeralOnly = true })
	noAttach := newTestDriver(t, func(c *Config) { c.AttachRequired = false })
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"controller mode/NodeStage", func() error {
			return call(ctrl.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/x", VolumeCapability: snw}))
		}, codes.Unimplemented},
		{"controller mode/NodeGetInfo", func() error { return call(ctrl.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})) }, codes.Unimplemented},
		{"node mode/CreateVolume", func() error { return call(nodeOnly.CreateVolume(ctx, createReq("v", gib))) }, codes.Unimplemented},
		{"node mode/ControllerGetCapabilities is empty", func() error {
			r, err := nodeOnly.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			if err == nil && len(r.GetCapabilities()) != 0 {
				return fmt.Errorf("capabilities %v", r.GetCapabilities())
			}
			return err
		}, codes.OK},
		{"ephemeral-only/NodeStage", func() error {
			return call(eph.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/x", VolumeCapability: snw}))
		}, codes.Unimplemented},
		{"ephemeral-only/CreateVolume", func() error { return call(eph.CreateVolume(ctx, createReq("v", gib))) }, codes.Unimplemented},
		{"ephemeral-only/persistent publish", func() error {
			return call(eph.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: t.TempDir() + "/t", VolumeCapability: snw}))
		}, codes.InvalidArgument},
		{"no attach/ControllerPublish", func() error {
			return call(noAttach.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: node, VolumeCapability: snw}))
		}, codes.Unimplemented},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Fatalf("code %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := New(Config{Mode: ModeController, EphemeralOnly: true, DataDir: t.TempDir()}); err == nil {
		t.Error("ephemeral-only with mode controller was accepted")
	}
}

// TestIdempotency repeats every state-changing RPC with the same request and expects the same
// answer (spec: all RPCs are idempotent; csi-sanity repeats the node ones 10 times).
func TestIdempotency(t *testing.T) {
	d := newTestDriver(t, nil)
	pods, staging := t.TempDir(), t.TempDir()
	var vol, snap, group string
	steps := []struct {
		name string
		call func() (proto.Message, error)
	}{
		{"CreateVolume", func() (proto.Message, error) {
			r, err := d.CreateVolume(ctx, createReq("idem", gib))
			vol = r.GetVolume().GetVolumeId()
			return r, err
		}},
		{"ControllerPublishVolume", func() (proto.Message, error) {
			return d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: snw})
		}},
		{"NodeStageVolume", func() (proto.Message, error) {
			return d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: snw})
		}},
		{"NodePublishVolume", func() (proto.Message, error) {
			return d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: pods + "/t", StagingTargetPath: staging, VolumeCapability: snw})
		}},
		{"ControllerExpandVolume", func() (proto.Message, error) {
			return d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
		}},
		{"NodeExpandVolume", func() (proto.Message, error) {
			return d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol, VolumePath: pods + "/t", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
		}},
		{"ControllerModifyVolume", func() (proto.Message, error) {
			return d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: vol, MutableParameters: map[string]string{"tier": "archive"}})
		}},
		{"CreateSnapshot", func() (proto.Message, error) {
			r, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "idem-snap", SourceVolumeId: vol})
			snap = r.GetSnapshot().GetSnapshotId()
			return r, err
		}},
		{"CreateVolumeGroupSnapshot", func() (proto.Message, error) {
			r, err := d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "idem-group", SourceVolumeIds: []string{vol}})
			group = r.GetGroupSnapshot().GetGroupSnapshotId()
			return r, err
		}},
		{"DeleteVolumeGroupSnapshot", func() (proto.Message, error) {
			return d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: group})
		}},
		{"DeleteSnapshot", func() (proto.Message, error) {
			return d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap})
		}},
		{"NodeUnpublishVolume", func() (proto.Message, error) {
			return d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: pods + "/t"})
		}},
		{"NodeUnstageVolume", func() (proto.Message, error) {
			return d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
		}},
		{"ControllerUnpublishVolume", func() (proto.Message, error) {
			return d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node})
		}},
		{"DeleteVolume", func() (proto.Message, error) {
			return d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol})
		}},
	}
	for _, st := range steps {
		first, err := st.call()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for i := 0; i < 3; i++ {
			again, err := st.call()
			if err != nil {
				t.Fatalf("%s repeated: %v", st.name, err)
			}
			if !proto.Equal(first, again) {
				t.Fatalf("%s repeated answered %v, first %v", st.name, again, first)
			}
		}
	}
	if _, err := os.Stat(pods + "/t"); !os.IsNotExist(err) {
		t.Errorf("target still exists after NodeUnpublishVolume: %v", err)
	}
	var left int
	d.store.View(func(s *state.Data) { left = len(s.Volumes) + len(s.Snapshots) + len(s.GroupSnapshots) + len(s.Node) })
	if left != 0 {
		t.Errorf("%d records left after the full lifecycle", left)
	}
	if entries, _ := os.ReadDir(filepath.Join(d.cfg.DataDir, "volumes")); len(entries) != 0 {
		t.Errorf("volume data left: %v", entries)
	}
}

// TestConcurrentCreateSameName: many CreateVolume calls with one name race; exactly one volume
// (and one backing directory) results and every caller gets its ID.
func TestConcurrentCreateSameName(t *testing.T) {
	d := newTestDriver(t, nil)
	const n = 32
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := d.CreateVolume(ctx, createReq("racy", gib, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)))
			ids[i], errs[i] = r.GetVolume().GetVolumeId(), err
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("create %d returned %s, create 0 returned %s", i, ids[i], ids[0])
		}
	}
	l := must(d.ListVolumes(ctx, &csi.ListVolumesRequest{}))(t)
	if len(l.GetEntries()) != 1 {
		t.Fatalf("%d volumes listed, want 1", len(l.GetEntries()))
	}
	if entries, _ := os.ReadDir(filepath.Join(d.cfg.DataDir, "volumes")); len(entries) != 1 {
		t.Fatalf("%d backing files, want 1", len(entries))
	}
}
