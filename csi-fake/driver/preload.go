package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/harness/fixtures"
)

// Preload puts fixtures in the driver before it serves. The volumes and snapshots are recorded as
// CreateVolume and CreateSnapshot record them, with their checks (a name used once, access types
// and modes, mutable parameters, a topology the driver serves, every volume within --capacity),
// all in one state update; then each volume's attachments, staging and publications are made by
// calling ControllerPublishVolume, NodeStageVolume and NodePublishVolume, so they pass those RPCs'
// checks (a known node, attached before staged, staged before published, the target's parent
// present) and have their effects (the target made, bind-mounted with --mount=bind).
//
// If a step fails, what was done is undone (unpublished, unstaged, detached, deleted), so a
// failed Preload leaves the driver as it was; the error names the fixture's source and entry.
func (d *Driver) Preload(ctx context.Context, f *fixtures.CSI) (retErr error) {
	if f.Empty() {
		return nil
	}
	var planned []*plannedVolume
	var snaps []string
	var err error
	if d.servesController() {
		err = d.store.Update(func(s *state.Data) error {
			var err error
			if planned, err = d.planVolumes(s, f); err != nil {
				return err
			}
			snaps, err = d.recordFixtures(s, f, planned)
			return err
		})
	} else {
		planned, err = d.nodeOnlyVolumes(f)
	}
	if err != nil {
		return err
	}
	var done []func()
	defer func() {
		if retErr == nil {
			return
		}
		for i := len(done) - 1; i >= 0; i-- {
			done[i]()
		}
		d.dropFixtures(planned, snaps)
	}()
	ctx = context.WithoutCancel(ctx)
	for _, pv := range planned {
		v := pv.fx
		bad := func(format string, args ...any) error { return f.Errorf("volumes", pv.i, v.Name, format, args...) }
		for k, p := range v.Published {
			mode, _ := accessMode(p.AccessMode, pv.modes[0]) // checked by planVolume
			if _, err := d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
				VolumeId: pv.id, NodeId: p.Node, Readonly: p.ReadOnly, VolumeCapability: pv.capability(mode), VolumeContext: pv.context,
			}); err != nil {
				return bad("published[%d]: %s", k, status.Convert(err).Message())
			}
			done = append(done, func() {
				d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: pv.id, NodeId: p.Node})
			})
		}
		if v.StagingPath != "" {
			if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
				VolumeId: pv.id, StagingTargetPath: v.StagingPath, VolumeCapability: pv.capability(pv.modes[0]), VolumeContext: pv.context,
			}); err != nil {
				return bad("stagingPath: %s", status.Convert(err).Message())
			}
			done = append(done, func() {
				d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: pv.id, StagingTargetPath: v.StagingPath})
			})
		}
		for k, t := range v.Targets {
			mode, _ := accessMode(t.AccessMode, pv.modes[0])
			if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
				VolumeId: pv.id, StagingTargetPath: v.StagingPath, TargetPath: t.Path, Readonly: t.ReadOnly,
				VolumeCapability: pv.capability(mode), VolumeContext: pv.context,
			}); err != nil {
				return bad("targets[%d]: %s", k, status.Convert(err).Message())
			}
			done = append(done, func() {
				d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: pv.id, TargetPath: t.Path})
			})
		}
	}
	return nil
}

type plannedVolume struct {
	i       int
	fx      *fixtures.Volume
	id      string
	modes   []csi.VolumeCapability_AccessMode_Mode
	vol     *state.Volume // nil in a node-only process
	context map[string]string
}

// capability is the VolumeCapability the node and attach calls carry for the volume.
func (pv *plannedVolume) capability(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if pv.fx.AccessType == state.AccessBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.fx.FsType, MountFlags: pv.fx.MountFlags}}
	}
	return c
}

// fixtureID derives an ID from a name, shaped as the driver's own ("vol-" and 16 hex digits), so
// fixtures without IDs give the same IDs in every run.
func fixtureID(prefix, kind, name string) string {
	sum := sha256.Sum256([]byte("plugsim/fixture/" + kind + "/" + name))
	return prefix + hex.EncodeToString(sum[:8])
}

func accessMode(name string, def csi.VolumeCapability_AccessMode_Mode) (csi.VolumeCapability_AccessMode_Mode, error) {
	if name == "" {
		return def, nil
	}
	m, ok := csi.VolumeCapability_AccessMode_Mode_value[name]
	if !ok || m == int32(csi.VolumeCapability_AccessMode_UNKNOWN) {
		return 0, fmt.Errorf("access mode %q: want a CSI access mode name (SINGLE_NODE_WRITER, MULTI_NODE_READER_ONLY, ...)", name)
	}
	return csi.VolumeCapability_AccessMode_Mode(m), nil
}

// planVolume checks what every volume has whatever the mode: a name, an ID, an access type and
// modes, a size.
func (d *Driver) planVolume(f *fixtures.CSI, i int, names, ids map[string]int) (*plannedVolume, error) {
	v := &f.Volumes[i]
	bad := func(format string, args ...any) error { return f.Errorf("volumes", i, v.Name, format, args...) }
	if v.Name == "" {
		return nil, bad("name is required (CreateVolume requires one)")
	}
	if j, ok := names[v.Name]; ok {
		return nil, bad("name %q is also volumes[%d]'s", v.Name, j)
	}
	names[v.Name] = i
	pv := &plannedVolume{i: i, fx: v, id: v.ID}
	if pv.id == "" {
		pv.id = fixtureID("vol-", "volume", v.Name)
	} else if err := state.ValidateID(pv.id); err != nil {
		return nil, bad("%v", err)
	}
	if j, ok := ids[pv.id]; ok {
		return nil, bad("id %q is also volumes[%d]'s", pv.id, j)
	}
	ids[pv.id] = i
	switch v.AccessType {
	case "", state.AccessMount:
	case state.AccessBlock:
		if v.FsType != "" || len(v.MountFlags) > 0 {
			return nil, bad("fsType and mountFlags are a mount volume's; this one is block")
		}
	default:
		return nil, bad("accessType %q: want mount or block", v.AccessType)
	}
	modes := v.AccessModes
	if len(modes) == 0 {
		modes = []string{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER.String()}
	}
	for k, m := range modes {
		mode, err := accessMode(m, 0)
		if err != nil {
			return nil, bad("accessModes[%d]: %v", k, err)
		}
		pv.modes = append(pv.modes, mode)
	}
	if v.Capacity < 0 {
		return nil, bad("capacity %d: must not be negative", v.Capacity)
	}
	for k, p := range v.Published {
		if p.Node == "" {
			return nil, bad("published[%d]: node is required (ControllerPublishVolume requires node_id)", k)
		}
		if _, err := accessMode(p.AccessMode, 0); err != nil {
			return nil, bad("published[%d]: %v", k, err)
		}
	}
	if v.StagingPath != "" && !filepath.IsAbs(v.StagingPath) {
		return nil, bad("stagingPath %q: want an absolute path", v.StagingPath)
	}
	for k, t := range v.Targets {
		if !filepath.IsAbs(t.Path) {
			return nil, bad("targets[%d]: path %q: want an absolute path", k, t.Path)
		}
		if _, err := accessMode(t.AccessMode, 0); err != nil {
			return nil, bad("targets[%d]: %v", k, err)
		}
	}
	return pv, nil
}

func (pv *plannedVolume) size() int64 {
	if pv.fx.Capacity == 0 {
		return DefaultVolumeSize
	}
	return int64(pv.fx.Capacity)
}

func (pv *plannedVolume) accessType() string {
	if pv.fx.AccessType == "" {
		return state.AccessMount
	}
	return pv.fx.AccessType
}

// planVolumes checks the volumes as CreateVolume would and builds their records; the caller holds
// the store's lock.
func (d *Driver) planVolumes(s *state.Data, f *fixtures.CSI) ([]*plannedVolume, error) {
	var out []*plannedVolume
	names, ids := map[string]int{}, map[string]int{}
	used := s.UsedBytes()
	for i := range f.Volumes {
		v := &f.Volumes[i]
		bad := func(format string, args ...any) error { return f.Errorf("volumes", i, v.Name, format, args...) }
		pv, err := d.planVolume(f, i, names, ids)
		if err != nil {
			return nil, err
		}
		if s.VolumeByName(v.Name) != nil {
			return nil, bad("name %q is a volume csi-fake already holds", v.Name)
		}
		if _, ok := s.Volumes[pv.id]; ok {
			return nil, bad("id %q is a volume csi-fake already holds", pv.id)
		}
		var vcaps []*csi.VolumeCapability
		for _, m := range pv.modes {
			vcaps = append(vcaps, pv.capability(m))
		}
		caps, err := capabilitiesOf("accessModes", vcaps)
		if err != nil {
			return nil, bad("%s", status.Convert(err).Message())
		}
		size := pv.size()
		// A size is added only when it fits what is left (used+size <= --capacity), and
		// UsedBytes saturates, so neither the difference nor the sum can wrap.
		if avail := max(d.cfg.Capacity-used, 0); size > avail {
			return nil, bad("capacity %d bytes: only %d of the driver's %d bytes are left (--capacity)", size, avail, d.cfg.Capacity)
		}
		used += size
		if err := validateMutable(v.MutableParameters); err != nil {
			return nil, bad("%s", status.Convert(err).Message())
		}
		topo := copyTopology(v.Topology)
		if len(topo) == 0 {
			if topo, err = d.pickTopology(nil); err != nil {
				return nil, bad("%v", err)
			}
		}
		for k, seg := range topo {
			if !d.segmentFits(seg) {
				return nil, bad("topology[%d] %v is not a segment this driver serves (its topology is %v)", k, seg, d.nodeTopology())
			}
		}
		created := v.CreatedAt.UTC()
		if v.CreatedAt.IsZero() {
			created = now()
		}
		pv.context = map[string]string{ContextSize: strconv.FormatInt(size, 10), ContextAccessType: pv.accessType()}
		pv.vol = &state.Volume{
			ID: pv.id, Name: v.Name, CapacityBytes: size, AccessType: pv.accessType(), Capabilities: caps,
			Parameters: copyMap(v.Parameters), MutableParameters: copyMap(v.MutableParameters),
			Context: copyMap(pv.context), Topology: topo, Created: created,
		}
		out = append(out, pv)
	}
	return out, nil
}

// nodeOnlyVolumes plans the volumes of a process without a controller service: it holds node
// records only, which NodeStageVolume makes from the volume context as for any volume it adopts.
func (d *Driver) nodeOnlyVolumes(f *fixtures.CSI) ([]*plannedVolume, error) {
	if len(f.Snapshots) > 0 {
		return nil, f.Errorf("snapshots", 0, f.Snapshots[0].Name, "%s", status.Convert(d.controllerOnly()).Message())
	}
	var out []*plannedVolume
	names, ids := map[string]int{}, map[string]int{}
	for i := range f.Volumes {
		pv, err := d.planVolume(f, i, names, ids)
		if err != nil {
			return nil, err
		}
		v := pv.fx
		if v.StagingPath == "" && len(v.Targets) == 0 && len(v.Published) == 0 {
			return nil, f.Errorf("volumes", i, v.Name, "%s; on a node, a volume exists only staged or published (give stagingPath, targets)",
				status.Convert(d.controllerOnly()).Message())
		}
		pv.context = map[string]string{ContextSize: strconv.FormatInt(pv.size(), 10), ContextAccessType: pv.accessType()}
		out = append(out, pv)
	}
	return out, nil
}

// recordFixtures checks the snapshots, creates the backing data of volumes and snapshots, and
// records them; the caller holds the store's lock. Nothing is recorded unless all of it succeeds.
func (d *Driver) recordFixtures(s *state.Data, f *fixtures.CSI, vols []*plannedVolume) (_ []string, retErr error) {
	type plannedSnap struct {
		i    int
		snap *state.Snapshot
		src  *state.Volume
	}
	var snaps []plannedSnap
	names, ids := map[string]int{}, map[string]int{}
	for i := range f.Snapshots {
		fx := &f.Snapshots[i]
		bad := func(format string, args ...any) error { return f.Errorf("snapshots", i, fx.Name, format, args...) }
		if fx.Name == "" {
			return nil, bad("name is required (CreateSnapshot requires one)")
		}
		if j, ok := names[fx.Name]; ok {
			return nil, bad("name %q is also snapshots[%d]'s", fx.Name, j)
		}
		if s.SnapshotByName(fx.Name) != nil {
			return nil, bad("name %q is a snapshot csi-fake already holds", fx.Name)
		}
		names[fx.Name] = i
		id := fx.ID
		if id == "" {
			id = fixtureID("snap-", "snapshot", fx.Name)
		} else if err := state.ValidateID(id); err != nil {
			return nil, bad("%v", err)
		}
		if j, ok := ids[id]; ok {
			return nil, bad("id %q is also snapshots[%d]'s", id, j)
		}
		if _, ok := s.Snapshots[id]; ok {
			return nil, bad("id %q is a snapshot csi-fake already holds", id)
		}
		ids[id] = i
		if fx.Source == "" {
			return nil, bad("source is required: the name or id of its volume (CreateSnapshot requires source_volume_id)")
		}
		var src *state.Volume
		for _, pv := range vols {
			if pv.id == fx.Source || pv.fx.Name == fx.Source {
				src = pv.vol
				break
			}
		}
		if src == nil {
			src = s.Volumes[fx.Source]
		}
		if src == nil {
			return nil, bad("source volume %q not found (name a volumes entry by its name or id)", fx.Source)
		}
		created := fx.CreatedAt.UTC()
		if fx.CreatedAt.IsZero() {
			created = now()
		}
		snaps = append(snaps, plannedSnap{i: i, src: src, snap: &state.Snapshot{
			ID: id, Name: fx.Name, SourceVolumeID: src.ID, SizeBytes: src.CapacityBytes, AccessType: src.AccessType,
			Parameters: copyMap(fx.Parameters), Created: created,
		}})
	}
	type madeData struct {
		in *area
		id string
	}
	var made []madeData
	defer func() {
		if retErr != nil {
			for _, m := range made {
				m.in.remove(m.id)
			}
		}
	}()
	for _, pv := range vols {
		has, err := d.vols.create(pv.id, pv.vol.AccessType, pv.vol.CapacityBytes, nil, "", false)
		if err != nil {
			return nil, f.Errorf("volumes", pv.i, pv.fx.Name, "create the volume's data: %v", err)
		}
		if has {
			made = append(made, madeData{&d.vols, pv.id})
		}
		pv.vol.DataCreated = has
	}
	for _, sn := range snaps {
		made = append(made, madeData{&d.snaps, sn.snap.ID})
		if _, err := d.snaps.create(sn.snap.ID, sn.src.AccessType, sn.src.CapacityBytes, &d.vols, sn.src.ID, true); err != nil {
			return nil, f.Errorf("snapshots", sn.i, sn.snap.Name, "copy volume %s into the snapshot: %v", sn.src.ID, err)
		}
	}
	var out []string
	for _, pv := range vols {
		pv.vol.Seq = s.Seq()
		s.Volumes[pv.id] = pv.vol
	}
	for _, sn := range snaps {
		sn.snap.Seq = s.Seq()
		s.Snapshots[sn.snap.ID] = sn.snap
		out = append(out, sn.snap.ID)
	}
	return out, nil
}

// dropFixtures forgets the volumes and snapshots of a failed Preload and removes their data.
func (d *Driver) dropFixtures(vols []*plannedVolume, snaps []string) {
	d.store.Update(func(s *state.Data) error {
		for _, pv := range vols {
			delete(s.Volumes, pv.id)
			delete(s.Node, pv.id)
		}
		for _, id := range snaps {
			delete(s.Snapshots, id)
		}
		return nil
	})
	for _, pv := range vols {
		os.RemoveAll(d.volumePath(pv.id))
	}
	for _, id := range snaps {
		os.RemoveAll(d.snapshotPath(id))
	}
}

func copyTopology(t []map[string]string) []map[string]string {
	var out []map[string]string
	for _, seg := range t {
		out = append(out, copyMap(seg))
	}
	return out
}
