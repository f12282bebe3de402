package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/internal/pathlimit"
)

func (d *Driver) nodeOnly() error {
	if !d.servesNode() {
		return status.Errorf(codes.Unimplemented, "this csi-fake runs --mode=%s: the node service is served by the node process", d.cfg.Mode)
	}
	return nil
}

func (d *Driver) stagingOnly() error {
	if err := d.nodeOnly(); err != nil {
		return err
	}
	if d.cfg.EphemeralOnly {
		return status.Error(codes.Unimplemented, "this csi-fake runs --ephemeral-only: inline ephemeral volumes are published without staging (no STAGE_UNSTAGE_VOLUME)")
	}
	return nil
}

// checkNodePath checks a staging_target_path or target_path, which csi-fake records and (a
// target) creates, mounts on and removes: the spec says it MUST be an absolute path in the root
// file system of the plugin; a relative one would resolve against csi-fake's working directory.
// A name over NAME_MAX or a path over PATH_MAX could never be made, so it is refused too.
// (volume_path of the stats and expand calls is only compared with the recorded paths; csi-sanity
// sends "some/path" there and expects NotFound.)
func checkNodePath(field, p string) error {
	switch {
	case p == "":
		return missing(field)
	case !filepath.IsAbs(p):
		return status.Errorf(codes.InvalidArgument, "%s %q is not an absolute path (spec: it MUST be absolute in the plugin's root file system)", field, p)
	case strings.IndexByte(p, 0) >= 0:
		return status.Errorf(codes.InvalidArgument, "%s %q contains a NUL byte", field, p)
	}
	if err := pathlimit.Check(p); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s %.40q...: %v", field, p, err)
	}
	return nil
}

// NodeGetCapabilities: staging, stats, expansion, SINGLE_NODE_MULTI_WRITER and health. In
// ephemeral-only mode only what applies to inline volumes.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	types := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
	}
	if !d.cfg.EphemeralOnly {
		types = append(types,
			csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
			csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
			csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
			csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH)
	}
	caps := make([]*csi.NodeServiceCapability, 0, len(types))
	for _, t := range types {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo reports the node ID, the attach limit and the node's topology segment. Kubelet calls
// it while registering the plugin and writes the answer into the CSINode object.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	resp := &csi.NodeGetInfoResponse{NodeId: d.cfg.NodeID, MaxVolumesPerNode: d.cfg.MaxVolumesPerNode}
	// With no segment at all (--node-topology=false and no --topology) the field is left unset: the
	// spec's "the node is not subject to any topological constraint" (NodeGetInfoResponse).
	if seg := d.nodeTopology(); !d.cfg.EphemeralOnly && len(seg) > 0 {
		resp.AccessibleTopology = &csi.Topology{Segments: seg}
	}
	return resp, nil
}

// nodeVolume returns the node's record of a volume, or a new one (not yet stored) made from the
// controller's record in one process, or from the volume context in node-only mode, where the
// node cannot know the controller's volumes (as in a real deployment).
func (d *Driver) nodeVolume(s *state.Data, id string, vctx map[string]string, c state.Capability) (*state.NodeVolume, error) {
	if nv, ok := s.Node[id]; ok {
		return nv, nil
	}
	if d.cfg.Mode == ModeAll {
		v, ok := s.Volumes[id]
		if !ok {
			return nil, fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		return &state.NodeVolume{VolumeID: id, CapacityBytes: v.CapacityBytes, AccessType: v.AccessType}, nil
	}
	nv := &state.NodeVolume{VolumeID: id, AccessType: c.AccessType, Context: copyMap(vctx)}
	if t, ok := vctx[ContextAccessType]; ok {
		if t != state.AccessMount && t != state.AccessBlock {
			return nil, fmt.Errorf("volume_context[%s]: %q is neither %s nor %s: %w", ContextAccessType, t, state.AccessMount, state.AccessBlock, state.ErrInvalid)
		}
		nv.AccessType = t
	}
	if v, ok := vctx[ContextSize]; ok {
		// The size becomes a sparse file on this node: it must be one this node could hold.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > d.cfg.Capacity {
			return nil, fmt.Errorf("volume_context[%s]: %q is not a size in bytes from 1 to this node's --capacity %d: %w", ContextSize, v, d.cfg.Capacity, state.ErrInvalid)
		}
		nv.CapacityBytes = n
	}
	if err := d.ensureBacking(nv); err != nil {
		return nil, err
	}
	return nv, nil
}

// ensureBacking creates the node-local data of a volume this node process adopted.
func (d *Driver) ensureBacking(nv *state.NodeVolume) error {
	if d.vols.exists(nv.VolumeID) == nil {
		return nil
	}
	size := nv.CapacityBytes
	if size == 0 {
		size = min(DefaultVolumeSize, d.cfg.Capacity)
	}
	_, err := d.vols.create(nv.VolumeID, nv.AccessType, size, nil, "", true)
	return err
}

func (d *Driver) nodeCapacity(s *state.Data, nv *state.NodeVolume) int64 {
	if v, ok := s.Volumes[nv.VolumeID]; ok && v.CapacityBytes > nv.CapacityBytes {
		return v.CapacityBytes
	}
	return nv.CapacityBytes
}

// NodeStageVolume records that the volume is staged at staging_target_path. Like hostpath it
// mounts nothing there (NodePublishVolume mounts the backing data directly). In one process
// with --attach-required, a volume not ControllerPublished to this node is FailedPrecondition:
// kubelet never stages before the attach has succeeded.
func (d *Driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := d.stagingOnly(); err != nil {
		return nil, err
	}
	id, stagingPath := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkNodePath("staging_target_path", stagingPath); err != nil {
		return nil, err
	}
	c, err := capabilityOf("volume_capability", req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	err = d.store.Update(func(s *state.Data) error {
		nv, err := d.nodeVolume(s, id, req.GetVolumeContext(), c)
		if err != nil {
			return err
		}
		if v, ok := s.Volumes[id]; ok && d.cfg.Mode == ModeAll && d.cfg.AttachRequired {
			if _, ok := v.Published[d.cfg.NodeID]; !ok {
				return fmt.Errorf("volume %s is not ControllerPublished to node %s; ControllerPublishVolume first: %w", id, d.cfg.NodeID, state.ErrFailedPrecondition)
			}
		}
		if c.AccessType != nv.AccessType {
			return fmt.Errorf("volume_capability asks for %s access, volume %s is %s: %w", c.AccessType, id, nv.AccessType, state.ErrFailedPrecondition)
		}
		switch {
		case nv.StagingPath == stagingPath:
			if nv.StageCapability != nil && !sameCapability(*nv.StageCapability, c) {
				return fmt.Errorf("volume %s is staged at %s with access mode %s, the request asks %s: %w", id, stagingPath, nv.StageCapability.AccessMode, c.AccessMode, state.ErrAlreadyExists)
			}
			return nil
		case nv.StagingPath != "":
			return fmt.Errorf("volume %s is already staged at %s, not at %s: %w", id, nv.StagingPath, stagingPath, state.ErrFailedPrecondition)
		}
		nv.StagingPath, nv.StageCapability = stagingPath, &c
		s.Node[id] = nv
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func sameCapability(a, b state.Capability) bool {
	return a.AccessType == b.AccessType && a.AccessMode == b.AccessMode && a.FsType == b.FsType &&
		strings.Join(a.MountFlags, ",") == strings.Join(b.MountFlags, ",")
}

// NodeUnstageVolume undoes NodeStageVolume. A volume that is not staged is a success
// (idempotent); one still published at a target is FailedPrecondition.
func (d *Driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := d.stagingOnly(); err != nil {
		return nil, err
	}
	id, stagingPath := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkNodePath("staging_target_path", stagingPath); err != nil {
		return nil, err
	}
	err := d.store.Update(func(s *state.Data) error {
		nv, ok := s.Node[id]
		if !ok {
			if _, known := s.Volumes[id]; known || d.cfg.Mode != ModeAll {
				// Known but not staged here, or node-only mode, where the node cannot tell
				// an unknown volume from one it never staged: either way it is unstaged.
				return nil
			}
			return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		if nv.StagingPath != stagingPath {
			return nil
		}
		if len(nv.Targets) > 0 {
			return fmt.Errorf("volume %s is still published at %v; NodeUnpublishVolume first: %w", id, targetPaths(nv), state.ErrFailedPrecondition)
		}
		nv.StagingPath, nv.StageCapability = "", nil
		if !nv.InUse() && !nv.Ephemeral {
			delete(s.Node, id)
		}
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func targetPaths(nv *state.NodeVolume) []string {
	out := make([]string, 0, len(nv.Targets))
	for t := range nv.Targets {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// multiTarget reports whether an access mode allows a second target path on the node (spec
// NodePublishVolume, the table for plugins with SINGLE_NODE_MULTI_WRITER).
func multiTarget(mode string) bool {
	return strings.HasPrefix(mode, "MULTI_NODE_") || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER.String()
}

// NodePublishVolume makes the volume available at target_path: it creates the target (a
// directory, or a file for block volumes; the CO creates only its parent) and, with --mount=bind,
// bind-mounts the backing data onto it. An inline ephemeral volume (volume_context
// csi.storage.k8s.io/ephemeral=true) is created here and deleted by NodeUnpublishVolume.
func (d *Driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkNodePath("target_path", target); err != nil {
		return nil, err
	}
	c, err := capabilityOf("volume_capability", req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[ContextEphemeral] == "true"
	if d.cfg.EphemeralOnly && !ephemeral {
		return nil, status.Errorf(codes.InvalidArgument, "volume_context: this csi-fake runs --ephemeral-only and publishes only inline ephemeral volumes (%s=true)", ContextEphemeral)
	}
	if p := req.GetStagingTargetPath(); p != "" {
		if err := checkNodePath("staging_target_path", p); err != nil {
			return nil, err
		}
	}
	if !ephemeral && req.GetStagingTargetPath() == "" {
		// spec: "Staging target path not set" is FailedPrecondition when STAGE_UNSTAGE_VOLUME is advertised.
		return nil, status.Error(codes.FailedPrecondition, "staging_target_path is not set: this driver has STAGE_UNSTAGE_VOLUME, call NodeStageVolume first")
	}
	var made *state.FileID
	var mounted bool
	var newEphemeral string
	err = d.store.Update(func(s *state.Data) error {
		nv, ok := s.Node[id]
		switch {
		case !ok && ephemeral:
			if _, taken := s.Volumes[id]; taken {
				return fmt.Errorf("volume_id %s names a persistent volume; an ephemeral volume needs its own ID: %w", id, state.ErrAlreadyExists)
			}
			// Data of that ID with no record here is another process's volume (the controller's,
			// with the data directory shared by --data-dir): adopting it as ephemeral would delete
			// it at NodeUnpublishVolume.
			if d.vols.exists(id) == nil {
				return fmt.Errorf("volume_id %s names a volume whose data exists (%s) and that this node did not publish; an ephemeral volume needs its own ID: %w", id, d.volumePath(id), state.ErrAlreadyExists)
			}
			size, err := ephemeralSize(req.GetVolumeContext())
			if err != nil {
				return err
			}
			// An ephemeral volume takes its space from the pool like a CreateVolume (hostpath
			// charges them too), so its sparse file is never larger than what is left.
			if avail := d.available(s, ""); size > avail {
				return fmt.Errorf("volume_context[%s]: %d bytes requested, %d of %d available (--capacity): %w", EphemeralSizeAttribute, size, avail, d.cfg.Capacity, state.ErrExhausted)
			}
			nv = &state.NodeVolume{VolumeID: id, Ephemeral: true, CapacityBytes: size, AccessType: c.AccessType, Context: copyMap(req.GetVolumeContext())}
			if _, err := d.vols.create(id, c.AccessType, size, nil, "", true); err != nil {
				return err
			}
			newEphemeral = id
		case !ok:
			if _, known := s.Volumes[id]; !known && d.cfg.Mode == ModeAll {
				return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
			}
			return fmt.Errorf("volume %s is not staged on this node; NodeStageVolume at %s first: %w", id, req.GetStagingTargetPath(), state.ErrFailedPrecondition)
		case !nv.Ephemeral && nv.StagingPath != req.GetStagingTargetPath():
			return fmt.Errorf("volume %s is staged at %q, not at staging_target_path %s: %w", id, nv.StagingPath, req.GetStagingTargetPath(), state.ErrFailedPrecondition)
		}
		if c.AccessType != nv.AccessType {
			return fmt.Errorf("volume_capability asks for %s access, volume %s is %s: %w", c.AccessType, id, nv.AccessType, state.ErrFailedPrecondition)
		}
		want := state.Target{ReadOnly: req.GetReadonly(), AccessType: c.AccessType, AccessMode: c.AccessMode, Bind: d.cfg.Mount == MountBind}
		if have, ok := nv.Targets[target]; ok {
			if have.ReadOnly != want.ReadOnly || have.AccessMode != want.AccessMode || have.AccessType != want.AccessType {
				return fmt.Errorf("volume %s is published at %s with readonly=%v mode %s, the request asks readonly=%v mode %s: %w",
					id, target, have.ReadOnly, have.AccessMode, want.ReadOnly, want.AccessMode, state.ErrAlreadyExists)
			}
			return nil
		}
		for other, t := range nv.Targets {
			if !multiTarget(c.AccessMode) || t.AccessMode != c.AccessMode {
				return fmt.Errorf("volume %s is published at %s with access mode %s, which allows no second target path: %w", id, other, t.AccessMode, state.ErrFailedPrecondition)
			}
		}
		var err error
		if made, err = makeTarget(target, c.AccessType); err != nil {
			return err
		}
		want.Made = made
		if d.cfg.Mount == MountBind {
			if v, ok := s.Volumes[id]; ok && !v.DataCreated {
				if _, err := d.vols.create(id, v.AccessType, v.CapacityBytes, nil, "", true); err != nil {
					return err
				}
				v.DataCreated = true
			}
			if err := d.bindPublish(id, target, c.AccessType, req.GetReadonly()); err != nil {
				return err
			}
			mounted = true
		}
		if nv.Targets == nil {
			nv.Targets = map[string]state.Target{}
		}
		nv.Targets[target] = want
		s.Node[id] = nv
		return nil
	})
	if err != nil {
		if mounted {
			unmountAll(target)
		}
		if made != nil {
			removeTarget(target, made)
		}
		if newEphemeral != "" {
			d.vols.remove(newEphemeral)
		}
		return nil, statusFor(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// bindPublish bind-mounts volume id's data onto target, each side opened without following a
// symlink and checked to be a directory (mount) or a file (block) first.
func (d *Driver) bindPublish(id, target, accessType string, readOnly bool) error {
	src, err := d.vols.openPath(id, accessType)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openNoFollow(target)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := checkKind(dst, accessType); err != nil {
		return fmt.Errorf("target_path %s %v: %w", target, err, state.ErrInvalid)
	}
	return bindMount(src, dst, target, readOnly)
}

func ephemeralSize(vctx map[string]string) (int64, error) {
	s, ok := vctx[EphemeralSizeAttribute]
	if !ok {
		return DefaultEphemeralSize, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("volume_context[%s]: %q is not a positive quantity such as 100Mi: %w", EphemeralSizeAttribute, s, state.ErrInvalid)
	}
	return q.Value(), nil
}

// NodeUnpublishVolume unmounts (with --mount=bind) and removes the target; the spec says the SP
// MUST delete what it created at target_path, and csi-sanity checks that it is gone. A target
// the volume is not published at is a success (idempotent). An ephemeral volume is deleted with
// its last target.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if err := checkNodePath("target_path", target); err != nil {
		return nil, err
	}
	var dropEphemeral bool
	err := d.store.Update(func(s *state.Data) error {
		nv, ok := s.Node[id]
		if !ok {
			if _, known := s.Volumes[id]; known || d.cfg.Mode != ModeAll {
				return nil
			}
			return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		t, ok := nv.Targets[target]
		if !ok {
			return nil
		}
		if t.Bind {
			if err := unmountAll(target); err != nil {
				return err
			}
		}
		if err := removeTarget(target, t.Made); err != nil {
			return err
		}
		delete(nv.Targets, target)
		if nv.Ephemeral && len(nv.Targets) == 0 {
			delete(s.Node, id)
			dropEphemeral = true
		} else if !nv.InUse() && !nv.Ephemeral {
			delete(s.Node, id)
		}
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	if dropEphemeral {
		d.vols.remove(id)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// publishedAt finds the node record of a volume staged or published at p.
func publishedAt(s *state.Data, id, p string) (*state.NodeVolume, error) {
	nv, ok := s.Node[id]
	if !ok {
		return nil, fmt.Errorf("volume %q is not staged or published on this node: %w", id, state.ErrNotFound)
	}
	if _, ok := nv.Targets[p]; ok || nv.StagingPath == p {
		return nv, nil
	}
	return nil, fmt.Errorf("volume %s is not staged or published at %s (targets %v, staging %q): %w", id, p, targetPaths(nv), nv.StagingPath, state.ErrNotFound)
}

// NodeGetVolumeStats reports bytes and inodes of a volume published (or staged) at volume_path:
// total is the volume's size, used what its backing data takes. Block volumes report bytes only
// (spec: unit BYTES, total).
func (d *Driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	id, p := req.GetVolumeId(), req.GetVolumePath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if p == "" {
		return nil, missing("volume_path")
	}
	var capBytes int64
	var accessType string
	var err error
	d.store.View(func(s *state.Data) {
		var nv *state.NodeVolume
		if nv, err = publishedAt(s, id, p); err == nil {
			capBytes, accessType = d.nodeCapacity(s, nv), nv.AccessType
		}
	})
	if err != nil {
		return nil, statusFor(err)
	}
	if accessType == state.AccessBlock {
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: capBytes}}}, nil
	}
	used, inodes := d.vols.usage(id)
	totalInodes := max(capBytes/4096, inodes)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: capBytes, Used: used, Available: max(capBytes-used, 0)},
		{Unit: csi.VolumeUsage_INODES, Total: totalInodes, Used: inodes, Available: totalInodes - inodes},
	}}, nil
}

// NodeExpandVolume grows the node's view of a volume published or staged at volume_path (a block
// volume's file grows with it) and returns the new size.
func (d *Driver) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if err := d.stagingOnly(); err != nil {
		return nil, err
	}
	id, p := req.GetVolumeId(), req.GetVolumePath()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if p == "" {
		return nil, missing("volume_path")
	}
	size, err := requestedSize(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	var got int64
	err = d.store.Update(func(s *state.Data) error {
		nv, err := publishedAt(s, id, p)
		if err != nil {
			return err
		}
		cur := d.nodeCapacity(s, nv)
		if size > cur {
			if err := d.canGrow(s, nv, cur, size); err != nil {
				return err
			}
			if err := d.vols.resize(id, nv.AccessType, size); err != nil {
				return err
			}
			cur = size
		}
		nv.CapacityBytes, got = cur, cur
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: got}, nil
}

// canGrow bounds a node expansion, whose size becomes a sparse file's: a volume the controller in
// this process knows grows on the node only up to the size ControllerExpandVolume gave it; an
// ephemeral volume grows out of the pool; a volume this node process adopted grows up to the
// node's --capacity (spec NodeExpandVolume: OutOfRange, "the capacity range is not allowed").
func (d *Driver) canGrow(s *state.Data, nv *state.NodeVolume, cur, size int64) error {
	if v, ok := s.Volumes[nv.VolumeID]; ok {
		return fmt.Errorf("capacity_range: volume %s is %d bytes; ControllerExpandVolume must grow it before the node can: %w", v.ID, v.CapacityBytes, state.ErrOutOfRange)
	}
	if nv.Ephemeral {
		if avail := d.available(s, ""); size-cur > avail {
			return fmt.Errorf("capacity_range: growing %s by %d bytes exceeds the %d bytes left (--capacity %d): %w", nv.VolumeID, size-cur, avail, d.cfg.Capacity, state.ErrOutOfRange)
		}
		return nil
	}
	if size > d.cfg.Capacity {
		return fmt.Errorf("capacity_range: %d bytes exceeds this node's --capacity %d: %w", size, d.cfg.Capacity, state.ErrOutOfRange)
	}
	return nil
}

// NodeGetVolumeHealth reports a volume's health from the node: backing data gone, a published
// target removed behind the driver's back, and the controller-side "health" parameter when the
// controller runs in the same process.
func (d *Driver) NodeGetVolumeHealth(_ context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	if err := d.stagingOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	var h *csi.VolumeHealth
	d.store.View(func(s *state.Data) {
		v, known := s.Volumes[id]
		nv, onNode := s.Node[id]
		switch {
		case known:
			h = d.volumeHealth(v)
		case onNode:
			h = &csi.VolumeHealth{VolumeId: id}
			if err := d.vols.exists(id); err != nil {
				h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{
					Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: "BackingDataMissing", Message: err.Error()})
			}
		default:
			return
		}
		if onNode {
			for _, t := range targetPaths(nv) {
				if _, err := os.Lstat(t); err != nil {
					h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{
						Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: "TargetPathMissing",
						Message: fmt.Sprintf("published target %s is gone: %v", t, err)})
				}
			}
		}
	})
	if h == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q is not known on this node", id)
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: h}, nil
}

// NodeGetStorageHealth reports the node's storage: the data directory must exist.
func (d *Driver) NodeGetStorageHealth(context.Context, *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	if err := d.nodeOnly(); err != nil {
		return nil, err
	}
	resp := &csi.NodeGetStorageHealthResponse{}
	if _, err := os.Stat(filepath.Join(d.cfg.DataDir, "volumes")); err != nil {
		resp.BackendHealth = append(resp.BackendHealth, &csi.NodeGetStorageHealthResponse_StorageBackendHealth{
			Status: csi.StorageHealthErrorType_STORAGE_UNREACHABLE, Reason: "DataDirectoryMissing", Message: err.Error()})
	}
	return resp, nil
}
