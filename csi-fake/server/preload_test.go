package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/plugsim/plugsim/harness/fixtures"
)

// What a CO sees of the example fixtures, over the socket.
func TestFixturesOverTheSocket(t *testing.T) {
	s := start(t, Options{NodeID: "plugsim-node", FixturesFile: "../../examples/fixtures/node.yaml"})
	if evs := s.Recorder().Events(); len(evs) != 0 {
		t.Fatalf("preloading recorded %d events", len(evs))
	}
	conn := dial(t, s.Endpoint())
	cc, nc := csi.NewControllerClient(conn), csi.NewNodeClient(conn)
	ctx := tctx(t)
	vols, err := cc.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(vols.Entries) != 3 {
		t.Fatalf("ListVolumes: %v %v", vols, err)
	}
	data := vols.Entries[0]
	if data.Volume.VolumeId != "vol-web-data" || data.Volume.CapacityBytes != 10*gib || data.Status.PublishedNodeIds[0] != "plugsim-node" {
		t.Errorf("data volume %v", data)
	}
	if e := vols.Entries[2]; e.Volume.CapacityBytes != 50*gib || len(e.Status.PublishedNodeIds) != 0 {
		t.Errorf("archive volume %v", e)
	}
	snaps, err := cc.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: "vol-web-data"})
	if err != nil || len(snaps.Entries) != 1 || snaps.Entries[0].Snapshot.SizeBytes != 10*gib {
		t.Fatalf("ListSnapshots: %v %v", snaps, err)
	}
	capa, err := cc.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil || capa.AvailableCapacity != (1<<40)-61*gib {
		t.Errorf("GetCapacity %v %v, want 1Ti less 61Gi", capa, err)
	}
	// The staged volume is staged: unstaging it at its path succeeds, and then it can be detached.
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.plugsim.dev/2f4b9c1e/globalmount"
	if _, err := nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-web-data", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-web-data", NodeId: "plugsim-node"}); err != nil {
		t.Fatal(err)
	}
}

// Fixtures seed a state directory once; a preload that fails leaves no state file behind, so the
// next start seeds it.
func TestFixturesSeedTheStateDirOnce(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	fx := &fixtures.CSI{Volumes: []fixtures.Volume{
		{Name: "pvc-1", ID: "vol-1", Capacity: fixtures.Size(gib), Published: []fixtures.Publication{{Node: "node-1"}}},
		{Name: "pvc-2", ID: "vol-2", Published: []fixtures.Publication{{Node: "node-9"}}},
	}}
	_, err := Start(Options{NodeID: "node-1", StateDir: stateDir, Fixtures: fx})
	if want := `fixtures: csi.volumes[1] "pvc-2": published[0]: node "node-9" is not known to this controller`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s…", err, want)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.json")); !os.IsNotExist(err) {
		t.Fatalf("a failed preload left a state file: %v", err)
	}

	fx.Volumes[1].Published = nil
	s := start(t, Options{NodeID: "node-1", StateDir: stateDir, Fixtures: fx})
	conn := dial(t, s.Endpoint())
	cc := csi.NewControllerClient(conn)
	ctx := tctx(t)
	if _, err := cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-2"}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	s.Close()

	s = start(t, Options{NodeID: "node-1", StateDir: stateDir, Fixtures: fx})
	vols, err := csi.NewControllerClient(dial(t, s.Endpoint())).ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(vols.Entries) != 1 || vols.Entries[0].Volume.VolumeId != "vol-1" || len(vols.Entries[0].Status.PublishedNodeIds) != 0 {
		t.Fatalf("after the restart: %v %v, want the state as it was left, not the fixtures again", vols, err)
	}
}

func TestBadFixturesFileStopsTheStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.yaml")
	os.WriteFile(file, []byte("csi:\n  volumes:\n    - {name: v, capacity: 2Ti}\n"), 0o600)
	_, err := Start(Options{NodeID: "node-1", FixturesFile: file})
	want := file + `: csi.volumes[0] "v": capacity 2199023255552 bytes: only 1099511627776 of the driver's 1099511627776 bytes are left (--capacity)`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	os.WriteFile(file, []byte("csi:\n  volumes:\n    - {name: v, capacty: 2Gi}\n"), 0o600)
	_, err = Start(Options{NodeID: "node-1", FixturesFile: file})
	if want := file + `: csi.volumes[0] "v": unknown key "capacty"`; err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
