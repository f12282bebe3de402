package driver

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/internal/victimtest"
)

// victim is a directory outside every directory a driver under test owns, with a file and a
// subdirectory in it. intact fails the test unless it is exactly as planted.
type victim struct {
	dir, file string
	before    string
}

func plantVictim(t testing.TB) *victim {
	t.Helper()
	v := &victim{dir: filepath.Join(t.TempDir(), "plugsim-victim")}
	v.file = filepath.Join(v.dir, "secret.txt")
	if err := os.MkdirAll(filepath.Join(v.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v.file, []byte("do not touch"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, "sub", "more.txt"), []byte("nor this"), 0o644); err != nil {
		t.Fatal(err)
	}
	v.before = victimtest.Tree(t, filepath.Dir(v.dir))
	return v
}

func (v *victim) intact(t testing.TB) {
	t.Helper()
	if now := victimtest.Tree(t, filepath.Dir(v.dir)); now != v.before {
		t.Fatalf("the victim outside the driver's directories changed:\nbefore:\n%s\nafter:\n%s", v.before, now)
	}
}

// hostileIDs are IDs that must be refused in every RPC, with a word of the reason each gets.
func hostileIDs(t testing.TB, d *Driver, v *victim) []struct{ id, reason string } {
	rel, err := filepath.Rel(d.vols.dir, v.dir)
	if err != nil {
		t.Fatal(err)
	}
	return []struct{ id, reason string }{
		{"../../../../../../.." + v.dir, "contains '/'"}, // the issue's reproduction, aimed at our victim
		{rel, "contains '/'"},
		{v.dir, "contains '/'"},
		{"..", "names a directory"},
		{".", "names a directory"},
		{"vol/../../x", "contains '/'"},
		{"vol-1/", "contains '/'"},
		{"vol\x00-1", "control character U+0000"},
		{"vol\n1", "control character U+000A"},
		{"vol\x7f", "control character U+007F"},
		{"vol\u0085", "control character U+0085"},
		{"vol\xff", "not valid UTF-8"},
		{strings.Repeat("v", state.MaxIDBytes+1), "129 bytes long"},
		{strings.Repeat("../", 1000), "bytes long"},
	}
}

// oddIDs are the neighbours of the hostile ones: unusual, but one safe file name each, so they
// work.
var oddIDs = []string{
	"..a", "a..", "a..b", "-rf", "~", "vol with spaces", "vol\\1", "ünïcødé",
	"csi-" + strings.Repeat("0123456789abcdef", 4), // kubelet's inline ephemeral volume handle
	strings.Repeat("v", state.MaxIDBytes),
}

// rpcsWithID calls every RPC that takes a volume, snapshot or group snapshot ID, with id in that
// field and everything else valid. service says which service serves it.
func rpcsWithID(t testing.TB, d *Driver, id, pods, staging string) []struct {
	name, service string
	call          func() error
} {
	eph := map[string]string{ContextEphemeral: "true"}
	target := filepath.Join(pods, "t")
	cr := func(src *csi.VolumeContentSource) *csi.CreateVolumeRequest {
		r := createReq("from-"+fmt.Sprint(len(id)), gib)
		r.VolumeContentSource = src
		return r
	}
	return []struct {
		name, service string
		call          func() error
	}{
		{"DeleteVolume", "controller", func() error { return call(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})) }},
		{"ControllerPublishVolume", "attach", func() error {
			return call(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: snw}))
		}},
		{"ControllerUnpublishVolume", "attach", func() error {
			return call(d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: node}))
		}},
		{"ValidateVolumeCapabilities", "controller", func() error {
			return call(d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{snw}}))
		}},
		{"ControllerExpandVolume", "controller", func() error {
			return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}))
		}},
		{"ControllerGetVolume", "controller", func() error { return call(d.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})) }},
		{"ControllerModifyVolume", "controller", func() error {
			return call(d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"tier": "premium"}}))
		}},
		{"ControllerGetVolumeHealth", "controller", func() error {
			return call(d.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: id}))
		}},
		{"CreateVolume/clone", "controller", func() error {
			return call(d.CreateVolume(ctx, cr(&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}})))
		}},
		{"CreateVolume/restore", "controller", func() error {
			return call(d.CreateVolume(ctx, cr(&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}})))
		}},
		{"CreateSnapshot", "controller", func() error {
			return call(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s-" + fmt.Sprint(len(id)), SourceVolumeId: id}))
		}},
		{"DeleteSnapshot", "controller", func() error { return call(d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id})) }},
		{"GetSnapshot", "controller", func() error { return call(d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: id})) }},
		{"ListSnapshots/snapshot_id", "controller", func() error { return call(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: id})) }},
		{"ListSnapshots/source_volume_id", "controller", func() error {
			return call(d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: id}))
		}},
		{"CreateVolumeGroupSnapshot", "controller", func() error {
			return call(d.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g-" + fmt.Sprint(len(id)), SourceVolumeIds: []string{id}}))
		}},
		{"DeleteVolumeGroupSnapshot", "controller", func() error {
			return call(d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id}))
		}},
		{"DeleteVolumeGroupSnapshot/snapshot_ids", "controller", func() error {
			return call(d.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group-x", SnapshotIds: []string{id}}))
		}},
		{"GetVolumeGroupSnapshot", "controller", func() error {
			return call(d.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: id}))
		}},
		{"GetVolumeGroupSnapshot/snapshot_ids", "controller", func() error {
			return call(d.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "group-x", SnapshotIds: []string{id}}))
		}},
		{"NodeStageVolume", "staging", func() error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: snw,
				VolumeContext: map[string]string{ContextSize: "1048576", ContextAccessType: state.AccessMount}}))
		}},
		{"NodeUnstageVolume", "staging", func() error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}))
		}},
		{"NodePublishVolume/ephemeral", "node", func() error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: snw, VolumeContext: eph}))
		}},
		{"NodePublishVolume/ephemeral block", "node", func() error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
				VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "1Mi"}}))
		}},
		{"NodePublishVolume", "node", func() error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw}))
		}},
		{"NodeUnpublishVolume", "node", func() error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}))
		}},
		{"NodeGetVolumeStats", "node", func() error {
			return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}))
		}},
		{"NodeExpandVolume", "staging", func() error {
			return call(d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}))
		}},
		{"NodeGetVolumeHealth", "staging", func() error {
			return call(d.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id}))
		}},
	}
}

func serves(d *Driver, service string) bool {
	switch service {
	case "controller":
		return d.servesController()
	case "attach":
		return d.servesController() && d.cfg.AttachRequired
	case "staging":
		return d.servesNode() && !d.cfg.EphemeralOnly
	default:
		return d.servesNode()
	}
}

var modes = []struct {
	name string
	mut  func(*Config)
}{
	{"all", nil},
	{"controller", func(c *Config) { c.Mode = ModeController }},
	{"node", func(c *Config) { c.Mode = ModeNode }},
	{"ephemeral-only", func(c *Config) { c.EphemeralOnly = true }},
}

// TestHostileIDsRefusedEverywhere sends every hostile ID to every RPC that takes an ID, in every
// mode: each is InvalidArgument with the reason (or Unimplemented where the mode does not serve
// the RPC), and the victim outside the driver's directories, the data directory and the CO's
// directories are as they were.
func TestHostileIDsRefusedEverywhere(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			v := plantVictim(t)
			d := newTestDriver(t, m.mut)
			pods, staging := t.TempDir(), t.TempDir()
			data, co := victimtest.Tree(t, d.cfg.DataDir), victimtest.Tree(t, pods)
			for _, h := range hostileIDs(t, d, v) {
				for _, rpc := range rpcsWithID(t, d, h.id, pods, staging) {
					err := rpc.call()
					want := codes.InvalidArgument
					if !serves(d, rpc.service) {
						want = codes.Unimplemented
					}
					if status.Code(err) != want {
						t.Errorf("%s(%s): %v, want %s", rpc.name, state.QuoteID(h.id), err, want)
						continue
					}
					if want == codes.InvalidArgument && !strings.Contains(status.Convert(err).Message(), h.reason) {
						t.Errorf("%s(%s): message %q does not say %q", rpc.name, state.QuoteID(h.id), status.Convert(err).Message(), h.reason)
					}
				}
			}
			v.intact(t)
			if now := victimtest.Tree(t, d.cfg.DataDir); now != data {
				t.Errorf("the data directory changed:\n%s", now)
			}
			if now := victimtest.Tree(t, pods); now != co {
				t.Errorf("the CO's directory changed:\n%s", now)
			}
			d.store.View(func(s *state.Data) {
				if n := len(s.Volumes) + len(s.Snapshots) + len(s.GroupSnapshots) + len(s.Node); n != 0 {
					t.Errorf("%d records were created from hostile IDs", n)
				}
			})
		})
	}
}

// TestIssueReproductions re-runs the two reproductions of issue 12 item 3: in --mode node and in
// --mode all, NodePublishVolume of an inline ephemeral volume with a "../" volume ID, then
// NodeUnpublishVolume. Both are refused; the victim is untouched.
func TestIssueReproductions(t *testing.T) {
	for _, m := range modes[:3:3] {
		if m.name == "controller" {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			v := plantVictim(t)
			d := newTestDriver(t, m.mut)
			target := filepath.Join(t.TempDir(), "mount")
			id := "../../../../../../.." + v.dir
			for _, capab := range []*csi.VolumeCapability{snw, blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)} {
				_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: capab,
					VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "1Gi"}})
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("NodePublishVolume: %v, want InvalidArgument", err)
				}
				_, err = d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("NodeUnpublishVolume: %v, want InvalidArgument", err)
				}
			}
			v.intact(t)
			if _, err := os.Lstat(target); !os.IsNotExist(err) {
				t.Errorf("target created for a refused ID: %v", err)
			}
		})
	}
}

// TestOddIDsWork runs the node lifecycle (adoption in node mode, an inline ephemeral volume in
// all mode) with every odd but safe ID: each lands as one entry in volumes/ and is gone after.
func TestOddIDsWork(t *testing.T) {
	v := plantVictim(t)
	nd := newTestDriver(t, func(c *Config) { c.Mode = ModeNode })
	all := newTestDriver(t, nil)
	for _, id := range oddIDs {
		t.Run(state.QuoteID(id), func(t *testing.T) {
			staging, pods := t.TempDir(), t.TempDir()
			target := filepath.Join(pods, "t")
			vctx := map[string]string{ContextSize: "1048576", ContextAccessType: state.AccessMount}
			must(nd.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: snw, VolumeContext: vctx}))(t)
			must(nd.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw, VolumeContext: vctx}))(t)
			if names := entries(t, nd.vols.dir); !contains(names, id) {
				t.Fatalf("volumes/ holds %q, not %q", names, id)
			}
			must(nd.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}))(t)
			must(nd.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}))(t)
			must(nd.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}))(t)

			eph := &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: snw,
				VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "1Mi"}}
			must(all.NodePublishVolume(ctx, eph))(t)
			if names := entries(t, all.vols.dir); len(names) != 1 || names[0] != id {
				t.Fatalf("volumes/ holds %q, want just %q", names, id)
			}
			must(all.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}))(t)
			if names := entries(t, all.vols.dir); len(names) != 0 {
				t.Fatalf("volumes/ after unpublish: %q", names)
			}
			if _, err := os.Lstat(target); !os.IsNotExist(err) {
				t.Fatalf("target after unpublish: %v", err)
			}
		})
	}
	v.intact(t)
}

func entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestTargetPaths: NodeUnpublishVolume removes only the directory or file NodePublishVolume
// created at the target, never what was there before or was put there since; a symlink at the
// target is refused, not followed; a relative path is refused.
func TestTargetPaths(t *testing.T) {
	blk := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	cases := []struct {
		name string
		// setup prepares the target (in pods) before the publish; after runs between publish
		// and unpublish.
		setup, after func(t *testing.T, target string, v *victim)
		capab        *csi.VolumeCapability
		relative     bool
		publish      codes.Code
		unpublish    codes.Code
		// gone: the target must not exist after the unpublish (csi-fake made it).
		gone bool
	}{
		{name: "csi-fake makes and removes the directory", capab: snw, gone: true},
		{name: "csi-fake makes and removes the block file", capab: blk, gone: true},
		{name: "an existing CO directory stays", capab: snw, setup: func(t *testing.T, target string, _ *victim) {
			mkdir(t, target)
			write(t, filepath.Join(target, "co-file"), "kept")
		}},
		{name: "an existing empty directory stays", capab: snw, setup: func(t *testing.T, target string, _ *victim) { mkdir(t, target) }},
		{name: "an existing file as a block target stays", capab: blk, setup: func(t *testing.T, target string, _ *victim) {
			write(t, target, "a device the CO made")
		}},
		{name: "the victim's own file as a block target stays", capab: blk},
		{name: "a symlink to the victim directory is refused", capab: snw, publish: codes.InvalidArgument, setup: func(t *testing.T, target string, v *victim) {
			symlink(t, v.dir, target)
		}},
		{name: "a symlink to the victim file is refused (block)", capab: blk, publish: codes.InvalidArgument, setup: func(t *testing.T, target string, v *victim) {
			symlink(t, v.file, target)
		}},
		{name: "a dangling symlink is refused", capab: snw, publish: codes.InvalidArgument, setup: func(t *testing.T, target string, v *victim) {
			symlink(t, filepath.Join(v.dir, "nothing"), target)
		}},
		{name: "a file where a mount volume needs a directory is refused", capab: snw, publish: codes.InvalidArgument, setup: func(t *testing.T, target string, _ *victim) {
			write(t, target, "x")
		}},
		{name: "a directory where a block volume needs a file is refused", capab: blk, publish: codes.InvalidArgument, setup: func(t *testing.T, target string, _ *victim) {
			mkdir(t, target)
		}},
		{name: "a target replaced by a symlink after publish stays", capab: snw, after: func(t *testing.T, target string, v *victim) {
			os.Remove(target)
			symlink(t, v.dir, target)
		}},
		{name: "a target replaced by another directory after publish stays", capab: snw, after: func(t *testing.T, target string, v *victim) {
			os.Remove(target)
			mkdir(t, target)
			write(t, filepath.Join(target, "someone-else"), "kept")
		}},
		{name: "a target replaced by a file after publish stays (block)", capab: blk, after: func(t *testing.T, target string, v *victim) {
			os.Remove(target)
			write(t, target, "someone else's")
		}},
		{name: "a target that was filled after publish is not emptied", capab: snw, unpublish: codes.Internal, after: func(t *testing.T, target string, v *victim) {
			write(t, filepath.Join(target, "written-by-the-pod"), "kept")
		}},
		{name: "a relative target path is refused", capab: snw, relative: true, publish: codes.InvalidArgument, unpublish: codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := plantVictim(t)
			d := newTestDriver(t, nil)
			pods := t.TempDir()
			target := filepath.Join(pods, "target")
			if strings.HasPrefix(tc.name, "the victim's own file") {
				target = v.file
			}
			if tc.relative {
				target = "relative/target"
			}
			if tc.setup != nil {
				tc.setup(t, target, v)
			}
			v.before = victimtest.Tree(t, filepath.Dir(v.dir)) // the victim as set up, symlinks included
			podsBefore := victimtest.Tree(t, pods)
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "csi-eph", TargetPath: target, VolumeCapability: tc.capab,
				VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: "1Mi"}})
			if status.Code(err) != tc.publish {
				t.Fatalf("NodePublishVolume: %v, want %s", err, tc.publish)
			}
			if tc.publish != codes.OK {
				v.intact(t)
				if now := victimtest.Tree(t, pods); now != podsBefore {
					t.Fatalf("a refused publish changed the CO's directory:\n%s", now)
				}
				if names := entries(t, d.vols.dir); len(names) != 0 {
					t.Fatalf("a refused publish left volume data %q", names)
				}
				return
			}
			if tc.after != nil {
				tc.after(t, target, v)
			}
			before := victimtest.Tree(t, pods)
			v.before = victimtest.Tree(t, filepath.Dir(v.dir))
			_, err = d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-eph", TargetPath: target})
			if status.Code(err) != tc.unpublish {
				t.Fatalf("NodeUnpublishVolume: %v, want %s", err, tc.unpublish)
			}
			v.intact(t)
			_, err = os.Lstat(target)
			switch {
			case tc.gone && !os.IsNotExist(err):
				t.Fatalf("the target csi-fake made is still there: %v", err)
			case !tc.gone:
				if now := victimtest.Tree(t, pods); now != before {
					t.Fatalf("NodeUnpublishVolume changed what csi-fake did not make:\nbefore:\n%s\nafter:\n%s", before, now)
				}
			}
		})
	}
}

func mkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestSizesBounded: the sizes a request names for data csi-fake creates (an ephemeral volume's
// "size", an adopted volume's plugsim.dev/size, a node expansion) are bounded by --capacity, and a
// refused one leaves no data.
func TestSizesBounded(t *testing.T) {
	blk := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	capacity := 4 * gib
	cfg := func(mode Mode) func(*Config) {
		return func(c *Config) { c.Mode, c.Capacity = mode, capacity }
	}
	ephReq := func(id, target, size string, c *csi.VolumeCapability) *csi.NodePublishVolumeRequest {
		return &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: c,
			VolumeContext: map[string]string{ContextEphemeral: "true", EphemeralSizeAttribute: size}}
	}

	t.Run("ephemeral", func(t *testing.T) {
		for _, tc := range []struct {
			size string
			want codes.Code
		}{
			{"1Ei", codes.ResourceExhausted},
			{"9223372036854775807", codes.ResourceExhausted},
			{"4Gi", codes.OK},
			{"4294967297", codes.ResourceExhausted},
			{"0", codes.InvalidArgument},
			{"-1Mi", codes.InvalidArgument},
			{"lots", codes.InvalidArgument},
		} {
			d := newTestDriver(t, cfg(ModeAll))
			target := filepath.Join(t.TempDir(), "t")
			_, err := d.NodePublishVolume(ctx, ephReq("csi-big", target, tc.size, blk))
			if status.Code(err) != tc.want {
				t.Errorf("size %s: %v, want %s", tc.size, err, tc.want)
			}
			names := entries(t, d.vols.dir)
			if tc.want != codes.OK {
				if len(names) != 0 {
					t.Errorf("size %s: refused, but left %q", tc.size, names)
				}
				continue
			}
			if fi, err := os.Stat(d.volumePath("csi-big")); err != nil || fi.Size() != capacity {
				t.Errorf("size %s: backing %v, %v", tc.size, fi, err)
			}
		}
	})

	t.Run("ephemeral volumes share the pool", func(t *testing.T) {
		d := newTestDriver(t, cfg(ModeAll))
		pods := t.TempDir()
		must(d.NodePublishVolume(ctx, ephReq("csi-a", pods+"/a", "3Gi", blk)))(t)
		if _, err := d.NodePublishVolume(ctx, ephReq("csi-b", pods+"/b", "2Gi", blk)); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("second ephemeral volume past the pool: %v", err)
		}
		if c := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t); c.GetAvailableCapacity() != gib {
			t.Fatalf("GetCapacity %d, want %d after a 3Gi ephemeral volume", c.GetAvailableCapacity(), gib)
		}
		if _, err := d.CreateVolume(ctx, createReq("pv", 2*gib)); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("CreateVolume past what ephemeral volumes left: %v", err)
		}
		for _, tc := range []struct {
			size int64
			want codes.Code
		}{{5 * gib, codes.OutOfRange}, {4 * gib, codes.OK}} {
			_, err := d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "csi-a", VolumePath: pods + "/a", CapacityRange: &csi.CapacityRange{RequiredBytes: tc.size}})
			if status.Code(err) != tc.want {
				t.Errorf("NodeExpandVolume to %d: %v, want %s", tc.size, err, tc.want)
			}
		}
		if fi, _ := os.Stat(d.volumePath("csi-a")); fi.Size() != 4*gib {
			t.Errorf("ephemeral block file is %d bytes, want %d", fi.Size(), 4*gib)
		}
	})

	t.Run("adoption", func(t *testing.T) {
		for _, tc := range []struct {
			vctx map[string]string
			want codes.Code
		}{
			{map[string]string{ContextSize: "1099511627776"}, codes.InvalidArgument}, // 1Ti > 4Gi
			{map[string]string{ContextSize: "9223372036854775807"}, codes.InvalidArgument},
			{map[string]string{ContextSize: "99999999999999999999"}, codes.InvalidArgument},
			{map[string]string{ContextSize: "-1"}, codes.InvalidArgument},
			{map[string]string{ContextSize: "0"}, codes.InvalidArgument},
			{map[string]string{ContextSize: "2Gi"}, codes.InvalidArgument},
			{map[string]string{ContextAccessType: "symlink"}, codes.InvalidArgument},
			{map[string]string{ContextAccessType: ""}, codes.InvalidArgument},
			{map[string]string{ContextSize: "4294967296", ContextAccessType: state.AccessBlock}, codes.OK},
			{nil, codes.OK},
		} {
			d := newTestDriver(t, cfg(ModeNode))
			c := snw
			if tc.vctx[ContextAccessType] == state.AccessBlock {
				c = blk
			}
			staging := t.TempDir()
			_, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-adopted", StagingTargetPath: staging, VolumeCapability: c, VolumeContext: tc.vctx})
			if status.Code(err) != tc.want {
				t.Errorf("context %v: %v, want %s", tc.vctx, err, tc.want)
			}
			if names := entries(t, d.vols.dir); (tc.want == codes.OK) != (len(names) == 1) {
				t.Errorf("context %v: volumes/ holds %q", tc.vctx, names)
			}
			if tc.want != codes.OK {
				continue
			}
			target := filepath.Join(t.TempDir(), "t")
			must(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-adopted", TargetPath: target, StagingTargetPath: staging, VolumeCapability: c}))(t)
			_, err = d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-adopted", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: capacity + 1}})
			if status.Code(err) != codes.OutOfRange {
				t.Errorf("NodeExpandVolume past --capacity: %v, want OutOfRange", err)
			}
		}
	})

	t.Run("a node expansion past the controller's size", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.Capacity = capacity })
		_, err := f.d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: f.vol, VolumePath: f.target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
		if status.Code(err) != codes.OutOfRange {
			t.Fatalf("NodeExpandVolume before ControllerExpandVolume: %v, want OutOfRange", err)
		}
		must(f.d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: f.vol, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}))(t)
		must(f.d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: f.vol, VolumePath: f.target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}))(t)
	})
}

// TestPlantedSymlinksInData: symlinks in the data directory (made inside a volume by a pod with a
// bind-published volume, or put at volumes/<id> by someone who can write the data directory) are
// copied as symlinks, removed as symlinks and never followed out of the directory.
func TestPlantedSymlinksInData(t *testing.T) {
	t.Run("inside a volume", func(t *testing.T) {
		v := plantVictim(t)
		d := newTestDriver(t, nil)
		id := must(d.CreateVolume(ctx, createReq("src", gib)))(t).GetVolume().GetVolumeId()
		mkdir(t, d.volumePath(id))
		symlink(t, v.dir, filepath.Join(d.volumePath(id), "up"))
		symlink(t, v.file, filepath.Join(d.volumePath(id), "secret"))
		symlink(t, "../../../../../../../.."+v.file, filepath.Join(d.volumePath(id), "rel"))
		snap := must(d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: id}))(t).GetSnapshot().GetSnapshotId()
		clone := must(d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{snw},
			CapacityRange: &csi.CapacityRange{RequiredBytes: gib}, Parameters: map[string]string{"kind": "fast"},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}}}))(t).GetVolume().GetVolumeId()
		for _, p := range []string{d.snapshotPath(snap), d.volumePath(clone)} {
			for _, name := range []string{"up", "secret", "rel"} {
				fi, err := os.Lstat(filepath.Join(p, name))
				if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("%s/%s: %v, %v; want the symlink copied as a symlink", p, name, fi, err)
				}
			}
		}
		if used, inodes := d.vols.usage(id); inodes != 4 || used > 64<<10 {
			t.Errorf("usage of a volume of three symlinks: %d bytes, %d inodes (the victim must not count)", used, inodes)
		}
		must(d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap}))(t)
		must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: clone}))(t)
		must(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: "/nowhere"}))(t)
		must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}))(t)
		v.intact(t)
	})

	t.Run("at volumes/<id>", func(t *testing.T) {
		v := plantVictim(t)
		d := newTestDriver(t, nil)
		blk := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		b := must(d.CreateVolume(ctx, createReq("blk", gib, blk)))(t).GetVolume().GetVolumeId()
		m := must(d.CreateVolume(ctx, createReq("mnt", gib)))(t).GetVolume().GetVolumeId()
		os.Remove(d.volumePath(b))
		symlink(t, v.file, d.volumePath(b))
		symlink(t, v.dir, d.volumePath(m))
		if _, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: b, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}); err == nil {
			t.Error("ControllerExpandVolume truncated through a symlink out of the data directory")
		}
		for _, id := range []string{b, m} {
			if _, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s-" + id, SourceVolumeId: id}); err == nil {
				t.Errorf("CreateSnapshot of %s, whose data is a symlink out of the data directory, succeeded", id)
			}
		}
		if names := entries(t, d.snaps.dir); len(names) != 0 {
			t.Errorf("snapshots/ holds %q", names)
		}
		if used, _ := d.vols.usage(m); used != 0 {
			t.Errorf("usage followed the symlink: %d bytes", used)
		}
		target := filepath.Join(t.TempDir(), "t")
		if _, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: m, VolumePath: target}); status.Code(err) != codes.NotFound {
			t.Errorf("stats of an unpublished volume: %v", err)
		}
		for _, id := range []string{b, m} {
			must(d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}))(t)
			if _, err := os.Lstat(d.volumePath(id)); !os.IsNotExist(err) {
				t.Errorf("DeleteVolume left volumes/%s: %v", id, err)
			}
		}
		v.intact(t)
	})
}

// TestHostilePathsRefused sends hostile target, staging and volume paths (the CO's paths, which
// the spec says are absolute) to every node RPC that takes one, for a volume that is staged and
// published elsewhere. A NUL byte, a relative path, a name over NAME_MAX or a path over PATH_MAX is
// InvalidArgument with the reason where the path is made or removed; a volume_path (NodeGetVolumeStats, NodeExpandVolume) is only compared with
// the recorded paths, so each is NotFound. Nothing is created or removed in the CO's directory or
// the victim beside it.
func TestHostilePathsRefused(t *testing.T) {
	v := plantVictim(t)
	d := newTestDriver(t, nil)
	pods := t.TempDir()
	rel, err := filepath.Rel(mustGetwd(t), v.dir)
	if err != nil {
		t.Fatal(err)
	}
	vol := must(d.CreateVolume(ctx, createReq("hostile-paths", gib)))(t).GetVolume().GetVolumeId()
	staging, target := filepath.Join(pods, "staging"), filepath.Join(pods, "target")
	if d.cfg.AttachRequired {
		must(d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: snw}))(t)
	}
	must(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: snw}))(t)
	must(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw}))(t)
	v.before = victimtest.Tree(t, filepath.Dir(v.dir))
	co := victimtest.Tree(t, pods)
	paths := []struct {
		path, reason string // what the InvalidArgument message says
	}{
		{pods + "/t\x00" + v.dir, "NUL"},
		{rel, "not an absolute path"},
		{"..", "not an absolute path"},
		{"../../" + filepath.Base(v.dir), "not an absolute path"},
		{"target", "not an absolute path"},
		{pods + "/" + strings.Repeat("t", 256), "NAME_MAX"},
		{pods + strings.Repeat("/d", 2100), "PATH_MAX"},
	}
	rpcs := []struct {
		name   string
		lookup bool // the path is only compared with the recorded ones: NotFound
		call   func(p string) error
	}{
		{"NodeStageVolume", false, func(p string) error {
			return call(d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: p, VolumeCapability: snw}))
		}},
		{"NodeUnstageVolume", false, func(p string) error {
			return call(d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: p}))
		}},
		{"NodePublishVolume", false, func(p string) error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: p, StagingTargetPath: staging, VolumeCapability: snw}))
		}},
		{"NodePublishVolume/staging", false, func(p string) error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: filepath.Join(pods, "t2"), StagingTargetPath: p, VolumeCapability: snw}))
		}},
		{"NodePublishVolume/ephemeral", false, func(p string) error {
			return call(d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "csi-eph", TargetPath: p, VolumeCapability: snw, VolumeContext: map[string]string{ContextEphemeral: "true"}}))
		}},
		{"NodeUnpublishVolume", false, func(p string) error {
			return call(d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: p}))
		}},
		{"NodeGetVolumeStats", true, func(p string) error {
			return call(d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: p}))
		}},
		{"NodeExpandVolume", true, func(p string) error {
			return call(d.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol, VolumePath: p, CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}))
		}},
	}
	for _, h := range paths {
		for _, rpc := range rpcs {
			err := rpc.call(h.path)
			switch {
			case rpc.lookup:
				if status.Code(err) != codes.NotFound {
					t.Errorf("%s(%.60q): %.200v, want NotFound", rpc.name, h.path, err)
				}
			case err == nil:
				t.Errorf("%s(%.60q) worked", rpc.name, h.path)
			case status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), h.reason):
				t.Errorf("%s(%.60q): %.200v, want InvalidArgument saying %q", rpc.name, h.path, err, h.reason)
			}
		}
	}
	v.intact(t)
	if now := victimtest.Tree(t, pods); now != co {
		t.Errorf("the CO's directory changed:\nbefore:\n%s\nafter:\n%s", co, now)
	}
}

func mustGetwd(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
