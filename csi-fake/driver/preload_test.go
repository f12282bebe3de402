package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/harness/fixtures"
)

var created = time.Date(2025, 6, 1, 9, 59, 0, 0, time.UTC)

// volumeFixtures has a volume attached, staged and published at a target under dir, a block
// volume attached read-only, a volume attached nowhere, and a snapshot.
func volumeFixtures(dir string) *fixtures.CSI {
	return &fixtures.CSI{
		Source: "node.yaml",
		Volumes: []fixtures.Volume{
			{Name: "pvc-data", ID: "vol-data", Capacity: 10 * fixtures.Size(gib), FsType: "ext4", MountFlags: []string{"noatime"},
				Parameters: map[string]string{"type": "fast"}, MutableParameters: map[string]string{"tier": "premium"},
				Topology: []map[string]string{{NodeTopologyKey: node}}, CreatedAt: created,
				Published: []fixtures.Publication{{Node: node}}, StagingPath: filepath.Join(dir, "staging"),
				Targets: []fixtures.Target{{Path: filepath.Join(dir, "target"), ReadOnly: true}}},
			{Name: "pvc-raw", Capacity: fixtures.Size(gib), AccessType: "block", AccessModes: []string{"SINGLE_NODE_MULTI_WRITER"},
				Published: []fixtures.Publication{{Node: "node-2", ReadOnly: true}}},
			{Name: "pvc-idle", AccessModes: []string{"MULTI_NODE_READER_ONLY"}},
		},
		Snapshots: []fixtures.Snapshot{{Name: "snap-data", Source: "pvc-data", Parameters: map[string]string{"retention": "7d"}, CreatedAt: created.Add(time.Hour)}},
	}
}

func TestPreloadVolumes(t *testing.T) {
	d := newTestDriver(t, nil)
	dir := t.TempDir()
	if err := d.Preload(ctx, volumeFixtures(dir)); err != nil {
		t.Fatal(err)
	}
	list := must(d.ListVolumes(ctx, &csi.ListVolumesRequest{}))(t)
	if len(list.Entries) != 3 {
		t.Fatalf("ListVolumes: %v", list)
	}
	data, raw, idle := list.Entries[0], list.Entries[1], list.Entries[2]
	if v := data.Volume; v.VolumeId != "vol-data" || v.CapacityBytes != 10*gib || v.VolumeContext[ContextSize] != "10737418240" ||
		v.AccessibleTopology[0].Segments[NodeTopologyKey] != node || data.Status.PublishedNodeIds[0] != node {
		t.Errorf("data volume %v", data)
	}
	if len(raw.Volume.VolumeId) != len("vol-")+16 || raw.Volume.VolumeContext[ContextAccessType] != state.AccessBlock || raw.Status.PublishedNodeIds[0] != "node-2" {
		t.Errorf("raw volume %v", raw)
	}
	if idle.Volume.CapacityBytes != DefaultVolumeSize || len(idle.Status.PublishedNodeIds) != 0 {
		t.Errorf("idle volume %v", idle)
	}
	if _, err := os.Stat(d.volumePath(raw.Volume.VolumeId)); err != nil {
		t.Errorf("block volume without its backing file: %v", err)
	}
	capa := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t)
	if capa.AvailableCapacity != 100*gib-12*gib {
		t.Errorf("GetCapacity %d, want the capacity less the preloaded volumes", capa.AvailableCapacity)
	}
	snaps := must(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{}))(t)
	if len(snaps.Entries) != 1 {
		t.Fatalf("ListSnapshots: %v", snaps)
	}
	if s := snaps.Entries[0].Snapshot; s.SourceVolumeId != "vol-data" || s.SizeBytes != 10*gib || !s.ReadyToUse ||
		!s.CreationTime.AsTime().Equal(created.Add(time.Hour)) || !strings.HasPrefix(s.SnapshotId, "snap-") {
		t.Errorf("snapshot %v", s)
	}
	d.store.View(func(s *state.Data) {
		v := s.Volumes["vol-data"]
		if !v.Created.Equal(created) || v.Capabilities[0].FsType != "ext4" || v.MutableParameters["tier"] != "premium" || v.Parameters["type"] != "fast" {
			t.Errorf("data volume record %+v", v)
		}
		nv := s.Node["vol-data"]
		if nv == nil || nv.StagingPath != filepath.Join(dir, "staging") || !nv.Targets[filepath.Join(dir, "target")].ReadOnly {
			t.Errorf("node record %+v", nv)
		}
		if !s.Volumes[raw.Volume.VolumeId].Published["node-2"].ReadOnly {
			t.Errorf("raw volume attachment %+v", s.Volumes[raw.Volume.VolumeId].Published)
		}
	})
	if fi, err := os.Stat(filepath.Join(dir, "target")); err != nil || !fi.IsDir() {
		t.Errorf("the target was not made as NodePublishVolume makes it: %v", err)
	}
	stats := must(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-data", VolumePath: filepath.Join(dir, "target")}))(t)
	if stats.Usage[0].Total != 10*gib {
		t.Errorf("stats %v", stats)
	}

	// The preloaded state takes part in the lifecycle: a published volume cannot be deleted until
	// it is unpublished, unstaged and detached, as one made by the RPCs.
	_, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-data"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("DeleteVolume of a published volume: %v", err)
	}
	must(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-data", TargetPath: filepath.Join(dir, "target")}))(t)
	must(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-data", StagingTargetPath: filepath.Join(dir, "staging")}))(t)
	must(d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-data", NodeId: node}))(t)
	must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-data"}))(t)
	if _, err := os.Stat(filepath.Join(dir, "target")); !os.IsNotExist(err) {
		t.Errorf("target still there after NodeUnpublishVolume: %v", err)
	}
	// The snapshot is a copy: a volume is restored from it.
	must(d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{snw},
		CapacityRange:       &csi.CapacityRange{RequiredBytes: 10 * gib},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snaps.Entries[0].Snapshot.SnapshotId}}}}))(t)
}

// Derived IDs are the same in every run.
func TestPreloadVolumeIDsAreStable(t *testing.T) {
	ids := func() []string {
		d := newTestDriver(t, nil)
		f := volumeFixtures(t.TempDir())
		f.Volumes[0].Targets = nil
		if err := d.Preload(ctx, f); err != nil {
			t.Fatal(err)
		}
		var out []string
		d.store.View(func(s *state.Data) {
			for _, v := range s.SortedVolumes() {
				out = append(out, v.ID)
			}
			for _, sn := range s.SortedSnapshots() {
				out = append(out, sn.ID)
			}
		})
		return out
	}
	if a, b := ids(), ids(); strings.Join(a, ",") != strings.Join(b, ",") || a[0] != "vol-data" {
		t.Fatalf("IDs %v then %v", a, b)
	}
}

func TestPreloadRejectsBadVolumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func(*Config)
		change func(f *fixtures.CSI, dir string)
		want   string
	}{
		{"volume larger than the capacity", nil, func(f *fixtures.CSI, _ string) { f.Volumes[2].Capacity = 90 * fixtures.Size(gib) },
			`node.yaml: csi.volumes[2] "pvc-idle": capacity 96636764160 bytes: only 95563022336 of the driver's 107374182400 bytes are left (--capacity)`},
		{"duplicate name", nil, func(f *fixtures.CSI, _ string) { f.Volumes[2].Name = "pvc-data" },
			`node.yaml: csi.volumes[2] "pvc-data": name "pvc-data" is also volumes[0]'s`},
		{"duplicate ID", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].ID = "vol-data" },
			`node.yaml: csi.volumes[1] "pvc-raw": id "vol-data" is also volumes[0]'s`},
		{"ID with a path in it", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].ID = "../../etc" },
			`node.yaml: csi.volumes[0] "pvc-data": ID "../../etc" contains '/' at byte 2: an ID is one file name under the data directory`},
		{"missing name", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].Name = "" },
			`node.yaml: csi.volumes[1]: name is required (CreateVolume requires one)`},
		{"unknown access type", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].AccessType = "file" },
			`node.yaml: csi.volumes[1] "pvc-raw": accessType "file": want mount or block`},
		{"unknown access mode", nil, func(f *fixtures.CSI, _ string) { f.Volumes[2].AccessModes = []string{"READ_WRITE_MANY"} },
			`node.yaml: csi.volumes[2] "pvc-idle": accessModes[0]: access mode "READ_WRITE_MANY": want a CSI access mode name (SINGLE_NODE_WRITER, MULTI_NODE_READER_ONLY, ...)`},
		{"fsType of a block volume", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].FsType = "xfs" },
			`node.yaml: csi.volumes[1] "pvc-raw": fsType and mountFlags are a mount volume's; this one is block`},
		{"bad mutable parameter", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].MutableParameters = map[string]string{"tier": "gold"} },
			`node.yaml: csi.volumes[0] "pvc-data": mutable_parameters[tier]: "gold" is not one of standard, premium, archive`},
		{"topology not served", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].Topology[0][NodeTopologyKey] = "node-9" },
			`node.yaml: csi.volumes[0] "pvc-data": topology[0] map[topology.plugsim.dev/node:node-9] is not a segment this driver serves (its topology is map[topology.plugsim.dev/node:node-1])`},
		{"snapshot of a missing volume", nil, func(f *fixtures.CSI, _ string) { f.Snapshots[0].Source = "pvc-x" },
			`node.yaml: csi.snapshots[0] "snap-data": source volume "pvc-x" not found (name a volumes entry by its name or id)`},
		{"duplicate snapshot", nil, func(f *fixtures.CSI, _ string) { f.Snapshots = append(f.Snapshots, f.Snapshots[0]) },
			`node.yaml: csi.snapshots[1] "snap-data": name "snap-data" is also snapshots[0]'s`},
		// Found by the RPCs the node state goes through, after the volumes are recorded.
		{"attached to an unknown node", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].Published[0].Node = "elsewhere" },
			`node.yaml: csi.volumes[1] "pvc-raw": published[0]: node "elsewhere" is not known to this controller`},
		{"single-node volume on two nodes", nil, func(f *fixtures.CSI, _ string) {
			f.Volumes[0].Published = append(f.Volumes[0].Published, fixtures.Publication{Node: "node-2"})
		}, `node.yaml: csi.volumes[0] "pvc-data": published[1]: volume vol-data is published to node node-1 and its access mode allows a single node`},
		{"attach limit", func(c *Config) { c.MaxVolumesPerNode = 1 }, func(f *fixtures.CSI, _ string) { f.Volumes[1].Published[0].Node = node },
			`node.yaml: csi.volumes[1] "pvc-raw": published[0]: node node-1 has 1 volumes attached, the maximum (--max-volumes-per-node)`},
		{"staged but not attached", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].Published = nil },
			`node.yaml: csi.volumes[0] "pvc-data": stagingPath: volume vol-data is not ControllerPublished to node node-1; ControllerPublishVolume first`},
		{"published but not staged", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].StagingPath = "" },
			`node.yaml: csi.volumes[0] "pvc-data": targets[0]: staging_target_path is not set`},
		{"target without its parent", nil, func(f *fixtures.CSI, dir string) { f.Volumes[0].Targets[0].Path = filepath.Join(dir, "no/such/target") },
			`node.yaml: csi.volumes[0] "pvc-data": targets[0]: target_path `},
		{"attached to no node", nil, func(f *fixtures.CSI, _ string) { f.Volumes[1].Published[0].Node = "" },
			`node.yaml: csi.volumes[1] "pvc-raw": published[0]: node is required (ControllerPublishVolume requires node_id)`},
		{"unknown access mode of a target", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].Targets[0].AccessMode = "RWO" },
			`node.yaml: csi.volumes[0] "pvc-data": targets[0]: access mode "RWO": want a CSI access mode name`},
		{"relative staging path", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].StagingPath = "staging" },
			`node.yaml: csi.volumes[0] "pvc-data": stagingPath "staging": want an absolute path`},
		{"relative target", nil, func(f *fixtures.CSI, _ string) { f.Volumes[0].Targets[0].Path = "target" },
			`node.yaml: csi.volumes[0] "pvc-data": targets[0]: path "target": want an absolute path`},
		{"node state on a controller", func(c *Config) { c.Mode = ModeController }, func(f *fixtures.CSI, _ string) {},
			`node.yaml: csi.volumes[0] "pvc-data": stagingPath: this csi-fake runs --mode=controller: the node service is served by the node process`},
		{"snapshots on a node", func(c *Config) { c.Mode = ModeNode }, func(f *fixtures.CSI, _ string) {},
			`node.yaml: csi.snapshots[0] "snap-data": this csi-fake runs --mode=node: the controller service is served by the controller process`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDriver(t, tc.cfg)
			dir := t.TempDir()
			f := volumeFixtures(dir)
			tc.change(f, dir)
			err := d.Preload(ctx, f)
			var fe *fixtures.Error
			if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s…", err, tc.want)
			}
			d.store.View(func(s *state.Data) {
				if len(s.Volumes)+len(s.Snapshots)+len(s.Node) != 0 {
					t.Errorf("a failed preload left %d volumes, %d snapshots, %d node records", len(s.Volumes), len(s.Snapshots), len(s.Node))
				}
			})
			for _, sub := range []string{"volumes", "snapshots"} {
				if ents, _ := os.ReadDir(filepath.Join(d.cfg.DataDir, sub)); len(ents) != 0 {
					t.Errorf("a failed preload left data in %s: %v", sub, ents)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "target")); !os.IsNotExist(err) {
				t.Errorf("a failed preload left the target: %v", err)
			}
		})
	}
}

// A node-only process holds node records only: the volumes it has staged and published.
func TestPreloadOnANode(t *testing.T) {
	d := newTestDriver(t, func(c *Config) { c.Mode = ModeNode })
	dir := t.TempDir()
	f := volumeFixtures(dir)
	f.Snapshots = nil
	f.Volumes = f.Volumes[:1]
	f.Volumes[0].Published = nil
	if err := d.Preload(ctx, f); err != nil {
		t.Fatal(err)
	}
	d.store.View(func(s *state.Data) {
		nv := s.Node["vol-data"]
		if len(s.Volumes) != 0 || nv == nil || nv.CapacityBytes != 10*gib || len(nv.Targets) != 1 {
			t.Errorf("node-only state: volumes %v, node record %+v", s.Volumes, nv)
		}
	})
	f.Volumes[0].StagingPath, f.Volumes[0].Targets = "", nil
	f.Volumes[0].Name, f.Volumes[0].ID = "other", ""
	err := newTestDriver(t, func(c *Config) { c.Mode = ModeNode }).Preload(ctx, f)
	want := `node.yaml: csi.volumes[0] "other": this csi-fake runs --mode=node: the controller service is served by the controller process; on a node, a volume exists only staged or published (give stagingPath, targets)`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
