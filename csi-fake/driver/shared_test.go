package driver

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const zoneKey = "topology.plugsim.dev/zone"

// TestNodeTopology checks the node's segment with and without NoNodeTopology (--node-topology):
// NodeGetInfo, which the kubelet copies into CSINode and the Node's labels, and the topology
// CreateVolume gives a volume with no requirements.
func TestNodeTopology(t *testing.T) {
	zone := map[string]string{zoneKey: "zone-a"}
	cases := []struct {
		name string
		mut  func(*Config)
		want map[string]string // NodeGetInfo's segments and CreateVolume's one segment; nil: none
	}{
		{"default", nil, map[string]string{NodeTopologyKey: node}},
		{"default with a zone", func(c *Config) { c.Topology = zone }, map[string]string{NodeTopologyKey: node, zoneKey: "zone-a"}},
		{"no node topology, a zone", func(c *Config) { c.Topology, c.NoNodeTopology = zone, true }, zone},
		{"no node topology, nothing else", func(c *Config) { c.NoNodeTopology = true }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDriver(t, tc.mut)
			info := must(d.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}))(t)
			if got := info.GetAccessibleTopology(); tc.want == nil && got != nil || !maps.Equal(got.GetSegments(), tc.want) {
				t.Errorf("NodeGetInfo accessible_topology %v, want segments %v", got, tc.want)
			}
			v := must(d.CreateVolume(ctx, createReq("v", gib)))(t).GetVolume()
			var got []map[string]string
			for _, tp := range v.GetAccessibleTopology() {
				got = append(got, tp.GetSegments())
			}
			if tc.want == nil && len(got) != 0 || tc.want != nil && (len(got) != 1 || !maps.Equal(got[0], tc.want)) {
				t.Errorf("CreateVolume accessible_topology %v, want [%v]", got, tc.want)
			}
		})
	}

	// A controller of zone-a storage serves the requisite the external-provisioner aggregates from the
	// nodes' CSINodes (immediate binding: every node's segment), and refuses another zone's.
	ctrl := newTestDriver(t, func(c *Config) { c.Mode, c.Topology, c.NoNodeTopology = ModeController, zone, true })
	req := createReq("in-zone", gib)
	req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: zone}}, Preferred: []*csi.Topology{{Segments: zone}}}
	v := must(ctrl.CreateVolume(ctx, req))(t).GetVolume()
	if tp := v.GetAccessibleTopology(); len(tp) != 1 || !maps.Equal(tp[0].GetSegments(), zone) {
		t.Errorf("CreateVolume in zone-a: accessible_topology %v, want [%v]", tp, zone)
	}
	req = createReq("other-zone", gib)
	req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{zoneKey: "zone-b"}}}}
	if _, err := ctrl.CreateVolume(ctx, req); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("CreateVolume in zone-b from zone-a storage: %v, want ResourceExhausted", err)
	}
}

// TestSharedDataDir runs a volume's life through three processes sharing one data directory, as a
// cluster's controller and node plugins do: the controller creates and attaches it, node-1 adopts
// it (NodeStageVolume from the volume context) and data lands in it, node-2 adopts it after node-1
// let go and finds that data, DeleteVolume on the controller removes it for all. A node's ephemeral
// publish naming the volume's ID is refused, so it can never take the shared data for its own.
func TestSharedDataDir(t *testing.T) {
	data := t.TempDir()
	ctrl := newTestDriver(t, func(c *Config) { c.Mode, c.DataDir, c.NodeID = ModeController, data, "" })
	nodes := map[string]*Driver{}
	for _, n := range []string{"node-1", "node-2"} {
		nodes[n] = newTestDriver(t, func(c *Config) { c.Mode, c.DataDir, c.NodeID, c.NoNodeTopology = ModeNode, data, n, true })
	}
	v := must(ctrl.CreateVolume(ctx, createReq("shared", gib)))(t).GetVolume()
	id := v.GetVolumeId()
	file := filepath.Join(data, "volumes", id, "written-on-node-1")

	for i, n := range []string{"node-1", "node-2"} {
		d := nodes[n]
		staging := t.TempDir()
		must(ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: n, VolumeCapability: snw}))(t)
		must(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: snw, VolumeContext: v.GetVolumeContext()}))(t)
		if got, want := d.volumePath(id), filepath.Join(data, "volumes", id); got != want {
			t.Fatalf("%s: the volume's data is at %s, want the shared %s", n, got, want)
		}
		if i == 0 {
			// What the pod writes through node-1's bind publish.
			if err := os.WriteFile(file, []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if b, err := os.ReadFile(file); err != nil || string(b) != "hello\n" {
			t.Fatalf("%s adopted the volume node-1 wrote: %q, %v; want hello", n, b, err)
		}
		must(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}))(t)
		// Unstaged, the node has no record of the volume, and its data is there.
		_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: filepath.Join(t.TempDir(), "eph"),
			VolumeCapability: snw, VolumeContext: map[string]string{ContextEphemeral: "true"}})
		if status.Code(err) != codes.AlreadyExists {
			t.Errorf("%s: an ephemeral publish with the shared volume's ID: %v, want AlreadyExists", n, err)
		}
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("%s: the refused ephemeral publish touched the volume's data: %v", n, err)
		}
		must(ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: n}))(t)
	}
	must(ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}))(t)
	if _, err := os.Lstat(filepath.Join(data, "volumes", id)); !os.IsNotExist(err) {
		t.Errorf("after DeleteVolume the volume's data is still there: %v", err)
	}
}

// TestSharedDataDirConcurrentAdoption stages one volume on eight node processes at once, all sharing
// the data directory (a MULTI_NODE volume, as a ReadWriteMany claim used by pods on every node): each
// adoption finds the directory made, or makes it, and none fails on another's mkdir.
func TestSharedDataDirConcurrentAdoption(t *testing.T) {
	data := t.TempDir()
	ctrl := newTestDriver(t, func(c *Config) { c.Mode, c.DataDir, c.NodeID = ModeController, data, "" })
	mnmw := mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	v := must(ctrl.CreateVolume(ctx, createReq("rwx", gib, mnmw)))(t).GetVolume()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		d := newTestDriver(t, func(c *Config) { c.Mode, c.DataDir, c.NodeID = ModeNode, data, fmt.Sprintf("node-%d", i) })
		staging := t.TempDir()
		go func() {
			_, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: mnmw, VolumeContext: v.GetVolumeContext()})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("NodeStageVolume: %v", err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(data, "volumes", v.GetVolumeId())); err != nil || !fi.IsDir() {
		t.Errorf("the shared volume's directory: %v, want a directory", err)
	}
}
