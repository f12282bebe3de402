package driver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/plugsim/plugsim/csi-fake/state"
)

func (d *Driver) controllerOnly() error {
	if !d.servesController() {
		if d.cfg.EphemeralOnly {
			return status.Error(codes.Unimplemented, "this csi-fake runs --ephemeral-only: it has no controller service (volumes exist only as inline ephemeral volumes)")
		}
		return status.Errorf(codes.Unimplemented, "this csi-fake runs --mode=%s: the controller service is served by the controller process", d.cfg.Mode)
	}
	return nil
}

// ControllerGetCapabilities lists everything the controller does. PUBLISH_UNPUBLISH_VOLUME and
// PUBLISH_READONLY depend on --attach-required.
//
// A process that serves no controller answers with no capabilities rather than an error: it is a
// question, and csi-sanity asks it on every endpoint.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	if !d.servesController() {
		return &csi.ControllerGetCapabilitiesResponse{}, nil
	}
	types := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
	}
	if d.cfg.AttachRequired {
		types = append(types,
			csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
			csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)
	}
	caps := make([]*csi.ControllerServiceCapability, 0, len(types))
	for _, t := range types {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// requestedSize picks a size from a capacity range: required_bytes when set, else the default
// bounded by limit_bytes. The exact request is allocated (no rounding), which csi-sanity checks.
func requestedSize(cr *csi.CapacityRange, def int64) (int64, error) {
	req, lim := cr.GetRequiredBytes(), cr.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required_bytes %d and limit_bytes %d must not be negative", req, lim)
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required_bytes %d exceeds limit_bytes %d", req, lim)
	}
	switch {
	case req > 0:
		return req, nil
	case lim > 0 && lim < def:
		return lim, nil
	default:
		return def, nil
	}
}

func fitsRange(size int64, cr *csi.CapacityRange) bool {
	if cr.GetRequiredBytes() > 0 && size < cr.GetRequiredBytes() {
		return false
	}
	if cr.GetLimitBytes() > 0 && size > cr.GetLimitBytes() {
		return false
	}
	return true
}

func (d *Driver) volumeProto(v *state.Volume) *csi.Volume {
	out := &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		VolumeContext:      copyMap(v.Context),
		AccessibleTopology: topologyProto(v.Topology),
	}
	switch {
	case v.SourceSnapshotID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID}}}
	case v.SourceVolumeID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID}}}
	}
	return out
}

// CreateVolume creates a volume and its backing data. The same name with compatible arguments
// returns the existing volume (spec: idempotent); with a different size, capabilities, parameters
// or source it is AlreadyExists. The whole check-and-create runs under the store's lock, so
// concurrent creates of one name yield one volume.
func (d *Driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, missing("name")
	}
	caps, err := capabilitiesOf("volume_capabilities", req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	size, err := requestedSize(req.GetCapacityRange(), DefaultVolumeSize)
	if err != nil {
		return nil, err
	}
	if err := validateMutable(req.GetMutableParameters()); err != nil {
		return nil, err
	}
	topo, err := d.pickTopology(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, statusFor(err)
	}
	accessType := caps[0].AccessType
	srcSnap := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	srcVol := req.GetVolumeContentSource().GetVolume().GetVolumeId()
	if req.GetVolumeContentSource() != nil && srcSnap == "" && srcVol == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_content_source: give a snapshot_id or a volume_id")
	}
	if err := checkOptionalID("volume_content_source.snapshot.snapshot_id", srcSnap); err != nil {
		return nil, err
	}
	if err := checkOptionalID("volume_content_source.volume.volume_id", srcVol); err != nil {
		return nil, err
	}

	var resp *csi.Volume
	var created string
	err = d.store.Update(func(s *state.Data) error {
		if old := s.VolumeByName(req.GetName()); old != nil {
			if err := compatible(old, req, caps); err != nil {
				return fmt.Errorf("volume name %q exists as %s: %w", req.GetName(), old.ID, err)
			}
			resp = d.volumeProto(old)
			return nil
		}
		if avail := d.available(s, ""); size > avail {
			return fmt.Errorf("capacity_range: %d bytes requested, %d of %d available: %w", size, avail, d.cfg.Capacity, state.ErrExhausted)
		}
		var from *area
		var srcID string
		switch {
		case srcSnap != "":
			snap, ok := s.Snapshots[srcSnap]
			if !ok {
				return fmt.Errorf("volume_content_source: snapshot %q: %w", srcSnap, state.ErrNotFound)
			}
			if size < snap.SizeBytes {
				return fmt.Errorf("capacity_range: %d bytes is smaller than snapshot %s (%d bytes): %w", size, srcSnap, snap.SizeBytes, state.ErrOutOfRange)
			}
			if snap.AccessType != accessType {
				return fmt.Errorf("volume_content_source: snapshot %s is of a %s volume, the request asks for %s: %w", srcSnap, snap.AccessType, accessType, state.ErrInvalid)
			}
			from, srcID = &d.snaps, srcSnap
		case srcVol != "":
			sv, ok := s.Volumes[srcVol]
			if !ok {
				return fmt.Errorf("volume_content_source: volume %q: %w", srcVol, state.ErrNotFound)
			}
			if size < sv.CapacityBytes {
				return fmt.Errorf("capacity_range: %d bytes is smaller than source volume %s (%d bytes): %w", size, srcVol, sv.CapacityBytes, state.ErrOutOfRange)
			}
			if sv.AccessType != accessType {
				return fmt.Errorf("volume_content_source: volume %s is %s, the request asks for %s: %w", srcVol, sv.AccessType, accessType, state.ErrInvalid)
			}
			from, srcID = &d.vols, srcVol
		}
		id := newID("vol-")
		hasData, err := d.vols.create(id, accessType, size, from, srcID, false)
		if err != nil {
			return err
		}
		created = id
		v := &state.Volume{
			ID: id, Name: req.GetName(), Seq: s.Seq(),
			CapacityBytes: size, AccessType: accessType, Capabilities: caps,
			Parameters:        copyMap(req.GetParameters()),
			MutableParameters: copyMap(req.GetMutableParameters()),
			Context: map[string]string{
				ContextSize:       strconv.FormatInt(size, 10),
				ContextAccessType: accessType,
			},
			SourceSnapshotID: srcSnap, SourceVolumeID: srcVol,
			Topology: topo, Created: now(), DataCreated: hasData,
		}
		s.Volumes[id] = v
		resp = d.volumeProto(v)
		return nil
	})
	if err != nil {
		if created != "" {
			d.vols.remove(created)
		}
		return nil, statusFor(err)
	}
	return &csi.CreateVolumeResponse{Volume: resp}, nil
}

// compatible decides whether a CreateVolume repeated with the same name may return the volume.
func compatible(v *state.Volume, req *csi.CreateVolumeRequest, caps []state.Capability) error {
	if !fitsRange(v.CapacityBytes, req.GetCapacityRange()) {
		return fmt.Errorf("its size %d bytes is outside the requested capacity_range [%d, %d]: %w",
			v.CapacityBytes, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), state.ErrAlreadyExists)
	}
	if caps[0].AccessType != v.AccessType {
		return fmt.Errorf("it is a %s volume, the request asks for %s: %w", v.AccessType, caps[0].AccessType, state.ErrAlreadyExists)
	}
	for _, c := range caps {
		if !hasMode(v.Capabilities, c.AccessMode) {
			return fmt.Errorf("it was not created with access mode %s: %w", c.AccessMode, state.ErrAlreadyExists)
		}
	}
	if !equalMaps(v.Parameters, req.GetParameters()) {
		return fmt.Errorf("it was created with other parameters (%v): %w", v.Parameters, state.ErrAlreadyExists)
	}
	if v.SourceSnapshotID != req.GetVolumeContentSource().GetSnapshot().GetSnapshotId() ||
		v.SourceVolumeID != req.GetVolumeContentSource().GetVolume().GetVolumeId() {
		return fmt.Errorf("it was created from another content source: %w", state.ErrAlreadyExists)
	}
	return nil
}

// DeleteVolume deletes a volume and its data. An unknown ID succeeds (spec: the volume is gone,
// which is what the CO wants). A volume still published is FailedPrecondition. Snapshots are
// independent copies and survive their source.
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	var found bool
	err := d.store.Update(func(s *state.Data) error {
		v, ok := s.Volumes[id]
		if !ok {
			return nil
		}
		if len(v.Published) > 0 {
			return fmt.Errorf("volume %s is still published to nodes %v; ControllerUnpublishVolume first: %w", id, publishedNodes(v), state.ErrFailedPrecondition)
		}
		if nv, ok := s.Node[id]; ok && nv.InUse() {
			return fmt.Errorf("volume %s is still staged or published on node %s; NodeUnpublishVolume and NodeUnstageVolume first: %w", id, d.cfg.NodeID, state.ErrFailedPrecondition)
		}
		delete(s.Volumes, id)
		delete(s.Node, id)
		found = true
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	if found {
		if err := d.vols.remove(id); err != nil {
			d.log.Warn("removing volume data", "volume", id, "err", err)
		}
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func publishedNodes(v *state.Volume) []string {
	out := make([]string, 0, len(v.Published))
	for n := range v.Published {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (d *Driver) attachOnly() error {
	if err := d.controllerOnly(); err != nil {
		return err
	}
	if !d.cfg.AttachRequired {
		return status.Error(codes.Unimplemented, "this csi-fake runs --attach-required=false: volumes need no ControllerPublishVolume (CSIDriver attachRequired: false)")
	}
	return nil
}

// ControllerPublishVolume attaches a volume to a node. The node must be known (--known-nodes),
// a single-node volume cannot be attached to a second node, and --max-volumes-per-node bounds the
// attachments per node.
func (d *Driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := d.attachOnly(); err != nil {
		return nil, err
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if node == "" {
		return nil, missing("node_id")
	}
	c, err := capabilityOf("volume_capability", req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	err = d.store.Update(func(s *state.Data) error {
		v, ok := s.Volumes[id]
		if !ok {
			return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		if !d.nodeKnown(node) {
			return fmt.Errorf("node %q is not known to this controller (it knows %q and --known-nodes %v): %w", node, d.cfg.NodeID, d.cfg.KnownNodes, state.ErrNotFound)
		}
		if c.AccessType != v.AccessType {
			return fmt.Errorf("volume_capability asks for %s access, volume %s is %s: %w", c.AccessType, id, v.AccessType, state.ErrFailedPrecondition)
		}
		want := state.Attachment{ReadOnly: req.GetReadonly(), AccessMode: c.AccessMode}
		if have, ok := v.Published[node]; ok {
			if have != want {
				return fmt.Errorf("volume %s is already published to node %s with readonly=%v mode %s, the request asks readonly=%v mode %s: %w",
					id, node, have.ReadOnly, have.AccessMode, want.ReadOnly, want.AccessMode, state.ErrAlreadyExists)
			}
			return nil
		}
		if singleNode(c.AccessMode) || volumeSingleNode(v) {
			for other := range v.Published {
				return fmt.Errorf("volume %s is published to node %s and its access mode allows a single node: %w", id, other, state.ErrFailedPrecondition)
			}
		}
		if max := d.cfg.MaxVolumesPerNode; max > 0 && s.PublishedOn(node) >= max {
			return fmt.Errorf("node %s has %d volumes attached, the maximum (--max-volumes-per-node): %w", node, max, state.ErrExhausted)
		}
		if v.Published == nil {
			v.Published = map[string]state.Attachment{}
		}
		v.Published[node] = want
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{
		"plugsim.dev/node":     node,
		"plugsim.dev/readonly": strconv.FormatBool(req.GetReadonly()),
	}}, nil
}

// ControllerUnpublishVolume detaches a volume from a node (or from every node when node_id is
// empty). An unknown volume or node is already detached, so it succeeds: csi-sanity's cleanup and
// the external-attacher both rely on that.
func (d *Driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := d.attachOnly(); err != nil {
		return nil, err
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	err := d.store.Update(func(s *state.Data) error {
		v, ok := s.Volumes[id]
		if !ok {
			return nil
		}
		// In one process the node's records are at hand: detaching a volume that is still
		// staged or published here is a CO bug worth reporting (kubelet unstages first).
		if nv, ok := s.Node[id]; ok && nv.InUse() && (node == "" || node == d.cfg.NodeID) {
			return fmt.Errorf("volume %s is still staged or published on node %s; NodeUnpublishVolume and NodeUnstageVolume first: %w", id, d.cfg.NodeID, state.ErrFailedPrecondition)
		}
		if node == "" {
			v.Published = nil
		} else {
			delete(v.Published, node)
		}
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms capabilities whose access type matches the volume's (every
// access mode is supported) and parameters equal to the ones it was created with.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	caps, err := capabilitiesOf("volume_capabilities", req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	var resp *csi.ValidateVolumeCapabilitiesResponse
	d.store.View(func(s *state.Data) {
		v, ok := s.Volumes[id]
		if !ok {
			return
		}
		resp = &csi.ValidateVolumeCapabilitiesResponse{}
		if caps[0].AccessType != v.AccessType {
			resp.Message = fmt.Sprintf("volume %s is a %s volume; %s access is not supported", id, v.AccessType, caps[0].AccessType)
			return
		}
		if len(req.GetParameters()) > 0 && !equalMaps(req.GetParameters(), v.Parameters) {
			resp.Message = fmt.Sprintf("volume %s was created with parameters %v", id, v.Parameters)
			return
		}
		resp.Confirmed = &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
			VolumeContext:      req.GetVolumeContext(),
			VolumeCapabilities: req.GetVolumeCapabilities(),
			Parameters:         req.GetParameters(),
			MutableParameters:  req.GetMutableParameters(),
		}
	})
	if resp == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q: not found", id)
	}
	return resp, nil
}

// ListVolumes pages through the volumes in creation order. next_token is the sequence number of
// the last volume returned, so a page stays exact when volumes are created or deleted between
// calls (hostpath never returns a next_token). A token that was never issued is Aborted.
func (d *Driver) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d must not be negative", req.GetMaxEntries())
	}
	resp := &csi.ListVolumesResponse{}
	var err error
	d.store.View(func(s *state.Data) {
		var after uint64
		if after, err = parseToken(req.GetStartingToken(), s.NextSeq); err != nil {
			return
		}
		vols := s.SortedVolumes()
		i := sort.Search(len(vols), func(i int) bool { return vols[i].Seq > after })
		for ; i < len(vols); i++ {
			if req.GetMaxEntries() > 0 && len(resp.Entries) == int(req.GetMaxEntries()) {
				resp.NextToken = strconv.FormatUint(vols[i-1].Seq, 10)
				break
			}
			v := vols[i]
			resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
				Volume: d.volumeProto(v),
				Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: publishedNodes(v)},
			})
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// parseToken reads a starting_token: the sequence number of the last entry of the previous page.
func parseToken(tok string, next uint64) (uint64, error) {
	if tok == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || n > next {
		return 0, status.Errorf(codes.Aborted, "starting_token %q was not issued by this driver; start again without a token", tok)
	}
	return n, nil
}

// available is the capacity volume id (none: "") may take: --capacity minus every other volume,
// never negative. Both terms are non-negative (UsedBytesExcept saturates), so the difference
// cannot wrap; a state over capacity (a smaller --capacity after a restart) leaves 0.
func (d *Driver) available(s *state.Data, id string) int64 {
	return max(d.cfg.Capacity-s.UsedBytesExcept(id), 0)
}

// GetCapacity reports the capacity left: --capacity minus the size of every volume, or 0 for a
// topology segment the driver does not serve.
func (d *Driver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if seg := req.GetAccessibleTopology().GetSegments(); len(seg) > 0 && !d.segmentFits(seg) {
		return &csi.GetCapacityResponse{AvailableCapacity: 0, MaximumVolumeSize: wrapperspb.Int64(0)}, nil
	}
	var avail int64
	d.store.View(func(s *state.Data) { avail = d.available(s, "") })
	return &csi.GetCapacityResponse{
		AvailableCapacity: avail,
		MaximumVolumeSize: wrapperspb.Int64(avail),
		MinimumVolumeSize: wrapperspb.Int64(1),
	}, nil
}

// ControllerExpandVolume grows a volume (never shrinks it) and asks for node expansion, which
// is where kubelet would resize the file system.
func (d *Driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, missing("capacity_range")
	}
	size, err := requestedSize(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, status.Error(codes.InvalidArgument, "capacity_range: give required_bytes or limit_bytes")
	}
	var got int64
	err = d.store.Update(func(s *state.Data) error {
		v, ok := s.Volumes[id]
		if !ok {
			return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		if size <= v.CapacityBytes {
			got = v.CapacityBytes
			return nil
		}
		// Compared with what the other volumes leave, never as a sum with the request: a size
		// near math.MaxInt64 would wrap the sum negative and pass (issue 17).
		if avail := d.available(s, id); size > avail {
			return fmt.Errorf("capacity_range: growing %s to %d bytes exceeds the %d bytes the other volumes leave (--capacity %d): %w", id, size, avail, d.cfg.Capacity, state.ErrOutOfRange)
		}
		if err := d.vols.resize(id, v.AccessType, size); err != nil {
			return err
		}
		v.CapacityBytes, got = size, size
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: got, NodeExpansionRequired: true}, nil
}

// ControllerGetVolume returns a volume and the nodes it is published to.
func (d *Driver) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	var resp *csi.ControllerGetVolumeResponse
	d.store.View(func(s *state.Data) {
		if v, ok := s.Volumes[id]; ok {
			resp = &csi.ControllerGetVolumeResponse{
				Volume: d.volumeProto(v),
				Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: publishedNodes(v)},
			}
		}
	})
	if resp == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q: not found", id)
	}
	return resp, nil
}

// ControllerModifyVolume changes a volume's mutable parameters (see validateMutable). Nothing is
// applied unless every key and value is valid (spec: the SP MUST NOT have applied any modification
// when it returns InvalidArgument).
func (d *Driver) ControllerModifyVolume(_ context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	if len(req.GetMutableParameters()) == 0 {
		return nil, missing("mutable_parameters")
	}
	if err := validateMutable(req.GetMutableParameters()); err != nil {
		return nil, err
	}
	err := d.store.Update(func(s *state.Data) error {
		v, ok := s.Volumes[id]
		if !ok {
			return fmt.Errorf("volume %q: %w", id, state.ErrNotFound)
		}
		if v.MutableParameters == nil {
			v.MutableParameters = map[string]string{}
		}
		for k, val := range req.GetMutableParameters() {
			v.MutableParameters[k] = val
		}
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}

// MutableParameters are the keys CreateVolume.mutable_parameters and ControllerModifyVolume
// accept (a VolumeAttributesClass's parameters); every other key is InvalidArgument.
var MutableParameters = []string{"iops", "throughputMiBps", "tier", "health"}

func validateMutable(p map[string]string) error {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := p[k]
		switch k {
		case "iops", "throughputMiBps":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1_000_000 {
				return status.Errorf(codes.InvalidArgument, "mutable_parameters[%s]: %q is not an integer in [1, 1000000]", k, v)
			}
		case "tier":
			if !slices.Contains([]string{"standard", "premium", "archive"}, v) {
				return status.Errorf(codes.InvalidArgument, "mutable_parameters[tier]: %q is not one of standard, premium, archive", v)
			}
		case "health":
			if _, ok := healthParameter[v]; !ok {
				return status.Errorf(codes.InvalidArgument, "mutable_parameters[health]: %q is not one of ok, degraded, inaccessible, data-loss", v)
			}
		default:
			return status.Errorf(codes.InvalidArgument, "mutable_parameters: unknown key %q; csi-fake accepts %v", k, MutableParameters)
		}
	}
	return nil
}

// healthParameter maps the "health" mutable parameter, which lets a test make a volume unhealthy,
// to what the health RPCs report.
var healthParameter = map[string]csi.VolumeHealthErrorType{
	"ok":           csi.VolumeHealthErrorType_UNKNOWN_VOLUME_HEALTH_TYPE,
	"degraded":     csi.VolumeHealthErrorType_DEGRADED,
	"inaccessible": csi.VolumeHealthErrorType_INACCESSIBLE,
	"data-loss":    csi.VolumeHealthErrorType_DATA_LOSS,
}

// volumeHealth reports a volume's adverse conditions: its backing data gone (someone removed it
// under the driver) and whatever the "health" mutable parameter says.
func (d *Driver) volumeHealth(v *state.Volume) *csi.VolumeHealth {
	h := &csi.VolumeHealth{VolumeId: v.ID}
	if err := d.vols.exists(v.ID); err != nil && (v.DataCreated || v.AccessType == state.AccessBlock) {
		h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{
			Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: "BackingDataMissing",
			Message: fmt.Sprintf("the volume's data at %s is gone: %v", d.volumePath(v.ID), err),
		})
	}
	if t := healthParameter[v.MutableParameters["health"]]; t != csi.VolumeHealthErrorType_UNKNOWN_VOLUME_HEALTH_TYPE {
		h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{
			Status: t, Reason: "InjectedByMutableParameter",
			Message: "the volume's \"health\" mutable parameter is " + v.MutableParameters["health"],
		})
	}
	return h
}

// ControllerGetVolumeHealth reports one volume's health (empty statuses: healthy).
func (d *Driver) ControllerGetVolumeHealth(_ context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	if err := checkID("volume_id", id); err != nil {
		return nil, err
	}
	var h *csi.VolumeHealth
	d.store.View(func(s *state.Data) {
		if v, ok := s.Volumes[id]; ok {
			h = d.volumeHealth(v)
		}
	})
	if h == nil {
		return nil, status.Errorf(codes.NotFound, "volume %q: not found", id)
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: h}, nil
}

// ControllerListVolumeHealth lists the volumes with an adverse condition (spec: SHOULD omit
// healthy ones), paginated like ListVolumes.
func (d *Driver) ControllerListVolumeHealth(_ context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d must not be negative", req.GetMaxEntries())
	}
	resp := &csi.ControllerListVolumeHealthResponse{}
	var err error
	d.store.View(func(s *state.Data) {
		var after, last uint64
		if after, err = parseToken(req.GetStartingToken(), s.NextSeq); err != nil {
			return
		}
		for _, v := range s.SortedVolumes() {
			if v.Seq <= after {
				continue
			}
			h := d.volumeHealth(v)
			if len(h.HealthStatuses) == 0 {
				continue
			}
			if req.GetMaxEntries() > 0 && len(resp.Entries) == int(req.GetMaxEntries()) {
				resp.NextToken = strconv.FormatUint(last, 10)
				break
			}
			resp.Entries = append(resp.Entries, h)
			last = v.Seq
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
