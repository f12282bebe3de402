package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestListVolumesPagination pages through volumes while others are created and deleted between
// pages: no duplicates, nothing skipped that existed throughout (the test csi-sanity disabled as
// too fragile for most drivers).
func TestListVolumesPagination(t *testing.T) {
	d := newTestDriver(t, nil)
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, must(d.CreateVolume(ctx, createReq(fmt.Sprintf("page-%d", i), gib)))(t).GetVolume().GetVolumeId())
	}
	p1 := must(d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 3}))(t)
	if len(p1.GetEntries()) != 3 || p1.GetNextToken() == "" {
		t.Fatalf("first page: %d entries, token %q", len(p1.GetEntries()), p1.GetNextToken())
	}
	// Delete the whole first page and add a volume: the token must stay valid.
	for _, e := range p1.GetEntries() {
		must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: e.GetVolume().GetVolumeId()}))(t)
	}
	added := must(d.CreateVolume(ctx, createReq("page-new", gib)))(t).GetVolume().GetVolumeId()
	p2 := must(d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 3, StartingToken: p1.GetNextToken()}))(t)
	p3 := must(d.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: p2.GetNextToken()}))(t)
	if p3.GetNextToken() != "" {
		t.Errorf("last page has next_token %q", p3.GetNextToken())
	}
	var got []string
	for _, e := range append(p2.GetEntries(), p3.GetEntries()...) {
		got = append(got, e.GetVolume().GetVolumeId())
	}
	want := append(append([]string{}, ids[3:]...), added)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages 2 and 3 = %v, want %v", got, want)
	}
}

func TestListSnapshotsFiltersAndPages(t *testing.T) {
	d := newTestDriver(t, nil)
	v1 := must(d.CreateVolume(ctx, createReq("v1", gib)))(t).GetVolume().GetVolumeId()
	v2 := must(d.CreateVolume(ctx, createReq("v2", gib)))(t).GetVolume().GetVolumeId()
	var snaps []string
	for i, v := range []string{v1, v2, v1, v2, v1} {
		snaps = append(snaps, must(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: fmt.Sprint("s", i), SourceVolumeId: v}))(t).GetSnapshot().GetSnapshotId())
	}
	bySource := must(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: v1}))(t)
	if len(bySource.GetEntries()) != 3 {
		t.Errorf("by source: %d entries, want 3", len(bySource.GetEntries()))
	}
	byID := must(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: snaps[3]}))(t)
	if len(byID.GetEntries()) != 1 || byID.GetEntries()[0].GetSnapshot().GetSnapshotId() != snaps[3] {
		t.Errorf("by id: %v", byID.GetEntries())
	}
	p1 := must(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 2, SourceVolumeId: v1}))(t)
	p2 := must(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: p1.GetNextToken(), SourceVolumeId: v1}))(t)
	if len(p1.GetEntries()) != 2 || len(p2.GetEntries()) != 1 || p2.GetEntries()[0].GetSnapshot().GetSnapshotId() != snaps[4] {
		t.Errorf("filtered pages: %v then %v", p1.GetEntries(), p2.GetEntries())
	}
}

func TestCapacityGoesDown(t *testing.T) {
	d := newTestDriver(t, nil)
	before := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t).GetAvailableCapacity()
	v := must(d.CreateVolume(ctx, createReq("c", 3*gib)))(t).GetVolume().GetVolumeId()
	after := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t).GetAvailableCapacity()
	if before-after != 3*gib {
		t.Errorf("capacity %d -> %d, want a drop of %d", before, after, 3*gib)
	}
	must(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v, CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * gib}}))(t)
	if got := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t).GetAvailableCapacity(); before-got != 5*gib {
		t.Errorf("after expansion capacity dropped by %d, want %d", before-got, 5*gib)
	}
	other := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{NodeTopologyKey: "elsewhere"}}}))(t)
	if other.GetAvailableCapacity() != 0 {
		t.Errorf("capacity in a segment the driver does not serve: %d", other.GetAvailableCapacity())
	}
}

// TestCloneAndRestoreCopyData: a clone and a snapshot restore start with the source's files and
// are independent of it afterwards.
func TestCloneAndRestoreCopyData(t *testing.T) {
	d := newTestDriver(t, nil)
	src := must(d.CreateVolume(ctx, createReq("src", gib)))(t).GetVolume().GetVolumeId()
	if _, err := os.Stat(d.volumePath(src)); !os.IsNotExist(err) {
		t.Fatalf("an empty mount volume got a directory before first use: %v", err)
	}
	os.Mkdir(d.volumePath(src), 0o755) // a test writing into the volume, as a bind publish would
	if err := os.WriteFile(filepath.Join(d.volumePath(src), "data"), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := must(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src}))(t).GetSnapshot().GetSnapshotId()
	os.WriteFile(filepath.Join(d.volumePath(src), "data"), []byte("v2"), 0o644)

	clone := createReq("clone", gib)
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}
	cv := must(d.CreateVolume(ctx, clone))(t).GetVolume()
	restore := createReq("restore", gib)
	restore.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}}
	rv := must(d.CreateVolume(ctx, restore))(t).GetVolume()
	if rv.GetContentSource().GetSnapshot().GetSnapshotId() != snap {
		t.Errorf("restored volume's content_source = %v", rv.GetContentSource())
	}
	for vol, want := range map[string]string{cv.GetVolumeId(): "v2", rv.GetVolumeId(): "v1"} {
		got, err := os.ReadFile(filepath.Join(d.volumePath(vol), "data"))
		if err != nil || string(got) != want {
			t.Errorf("volume %s data = %q, %v; want %q", vol, got, err, want)
		}
	}
	// Deleting the source leaves the snapshot and the clone intact.
	must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: src}))(t)
	if got := must(d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: snap}))(t); got.GetSnapshot().GetSourceVolumeId() != src {
		t.Errorf("snapshot after source deletion: %v", got)
	}
}

// TestBlockVolumes: block volumes are sparse files; publish creates a file target; stats report
// bytes only; expansion grows the file; a snapshot copies without filling the holes.
func TestBlockVolumes(t *testing.T) {
	d := newTestDriver(t, nil)
	bc := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	v := must(d.CreateVolume(ctx, createReq("blk", 10*gib, bc)))(t).GetVolume().GetVolumeId()
	fi, err := os.Stat(d.volumePath(v))
	if err != nil || fi.Size() != 10*gib || !fi.Mode().IsRegular() {
		t.Fatalf("backing file: %v, %v", fi, err)
	}
	if used, _ := d.vols.usage(v); used > 1<<20 {
		t.Errorf("a fresh block volume uses %d bytes; it should be sparse", used)
	}
	f, _ := os.OpenFile(d.volumePath(v), os.O_WRONLY, 0)
	f.WriteAt([]byte("payload"), 5*gib)
	f.Close()
	snap := must(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "blk-snap", SourceVolumeId: v}))(t).GetSnapshot().GetSnapshotId()
	if used, _ := d.snaps.usage(snap); used > 1<<20 {
		t.Errorf("the snapshot of a sparse volume uses %d bytes", used)
	}
	buf := make([]byte, 7)
	sf, err := os.Open(d.snapshotPath(snap))
	if err != nil {
		t.Fatal(err)
	}
	sf.ReadAt(buf, 5*gib)
	sf.Close()
	if string(buf) != "payload" {
		t.Errorf("snapshot data at 5GiB = %q", buf)
	}

	pods, staging := t.TempDir(), t.TempDir()
	must(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v, NodeId: node, VolumeCapability: bc}))(t)
	must(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v, StagingTargetPath: staging, VolumeCapability: bc}))(t)
	target := pods + "/dev"
	must(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v, TargetPath: target, StagingTargetPath: staging, VolumeCapability: bc}))(t)
	if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("block target should be a file: %v, %v", fi, err)
	}
	st := must(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v, VolumePath: target}))(t)
	if len(st.GetUsage()) != 1 || st.GetUsage()[0].GetTotal() != 10*gib {
		t.Errorf("block stats: %v", st.GetUsage())
	}
	must(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v, CapacityRange: &csi.CapacityRange{RequiredBytes: 12 * gib}}))(t)
	if fi, _ := os.Stat(d.volumePath(v)); fi.Size() != 12*gib {
		t.Errorf("expanded backing file is %d bytes", fi.Size())
	}
}

// TestEphemeralLifecycle: in ephemeral-only mode NodePublishVolume creates the volume (sized by
// the "size" attribute), stats work, and NodeUnpublishVolume removes target and data.
func TestEphemeralLifecycle(t *testing.T) {
	d := newTestDriver(t, func(c *Config) { c.EphemeralOnly = true })
	pods := t.TempDir()
	target := pods + "/mount"
	req := &csi.NodePublishVolumeRequest{VolumeId: "csi-0123", TargetPath: target, VolumeCapability: snw,
		VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "64Mi", "csi.storage.k8s.io/pod.name": "web"}}
	must(d.NodePublishVolume(ctx, req))(t)
	must(d.NodePublishVolume(ctx, req))(t) // idempotent
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target: %v, %v", fi, err)
	}
	st := must(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "csi-0123", VolumePath: target}))(t)
	if st.GetUsage()[0].GetTotal() != 64<<20 {
		t.Errorf("ephemeral volume total %d, want 64Mi", st.GetUsage()[0].GetTotal())
	}
	must(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123", TargetPath: target}))(t)
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target after unpublish: %v", err)
	}
	if _, err := os.Stat(d.volumePath("csi-0123")); !os.IsNotExist(err) {
		t.Errorf("ephemeral data after unpublish: %v", err)
	}
	if caps := must(d.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{}))(t); len(caps.GetCapabilities()) != 0 {
		t.Errorf("ephemeral-only advertises %v", caps.GetCapabilities())
	}
}

// TestVolumeHealth: the "health" mutable parameter and a vanished backing directory show up in
// the controller and node health RPCs; healthy volumes are omitted from the list.
func TestVolumeHealth(t *testing.T) {
	f := newFixture(t, nil)
	d := f.d
	h := must(d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: f.vol}))(t)
	if len(h.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("fresh volume unhealthy: %v", h)
	}
	if l := must(d.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{}))(t); len(l.GetEntries()) != 0 {
		t.Fatalf("healthy volumes listed: %v", l.GetEntries())
	}
	must(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: f.vol, MutableParameters: map[string]string{"health": "degraded"}}))(t)
	if h := must(d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: f.idle}))(t); len(h.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Fatalf("an empty volume that never needed a directory is reported unhealthy: %v", h)
	}
	blk := must(d.CreateVolume(ctx, createReq("blk", gib, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))))(t).GetVolume().GetVolumeId()
	os.RemoveAll(d.volumePath(blk))
	l := must(d.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{MaxEntries: 1}))(t)
	if len(l.GetEntries()) != 1 || l.GetEntries()[0].GetHealthStatuses()[0].GetStatus() != csi.VolumeHealthErrorType_DEGRADED || l.GetNextToken() == "" {
		t.Fatalf("first health page: %v", l)
	}
	l2 := must(d.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{StartingToken: l.GetNextToken()}))(t)
	if len(l2.GetEntries()) != 1 || l2.GetEntries()[0].GetVolumeId() != blk ||
		l2.GetEntries()[0].GetHealthStatuses()[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE {
		t.Fatalf("second health page: %v", l2)
	}
	os.Remove(f.target)
	nh := must(d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: f.vol}))(t)
	reasons := map[string]bool{}
	for _, e := range nh.GetVolumeHealth().GetHealthStatuses() {
		reasons[e.GetReason()] = true
	}
	if !reasons["InjectedByMutableParameter"] || !reasons["TargetPathMissing"] {
		t.Fatalf("node health reasons %v", reasons)
	}
	if sh := must(d.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{}))(t); len(sh.GetBackendHealth()) != 0 {
		t.Errorf("storage unhealthy: %v", sh)
	}
}

// TestNodeModeAdoptsVolumes: a node-only process learns size and type from the volume context
// CreateVolume returned, as a node plugin in a real deployment must.
func TestNodeModeAdoptsVolumes(t *testing.T) {
	ctrl := newTestDriver(t, func(c *Config) { c.Mode = ModeController })
	nd := newTestDriver(t, func(c *Config) { c.Mode = ModeNode })
	v := must(ctrl.CreateVolume(ctx, createReq("split", 2*gib)))(t).GetVolume()
	pub := must(ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: node, VolumeCapability: snw}))(t)
	staging, pods := t.TempDir(), t.TempDir()
	must(nd.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: snw,
		VolumeContext: v.GetVolumeContext(), PublishContext: pub.GetPublishContext()}))(t)
	must(nd.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: pods + "/t", StagingTargetPath: staging,
		VolumeCapability: snw, VolumeContext: v.GetVolumeContext()}))(t)
	st := must(nd.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.GetVolumeId(), VolumePath: pods + "/t"}))(t)
	if st.GetUsage()[0].GetTotal() != 2*gib {
		t.Errorf("node-side total %d, want %d", st.GetUsage()[0].GetTotal(), 2*gib)
	}
}
