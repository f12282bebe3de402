package driver

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugsim/plugsim/csi-fake/state"
)

// GroupControllerGetCapabilities: group snapshots (GA since spec v1.11).
func (d *Driver) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}},
	}}}, nil
}

func (d *Driver) groupProto(s *state.Data, g *state.GroupSnapshot) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: g.ID, CreationTime: timestamppb.New(g.Created), ReadyToUse: true}
	for _, id := range g.SnapshotIDs {
		if sn, ok := s.Snapshots[id]; ok {
			out.Snapshots = append(out.Snapshots, snapshotProto(sn))
		}
	}
	return out
}

// CreateVolumeGroupSnapshot snapshots several volumes at once (under one lock, so no write
// through the driver lands between them). The same name with the same volumes returns the
// existing group; with other volumes it is AlreadyExists.
func (d *Driver) CreateVolumeGroupSnapshot(_ context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, missing("name")
	}
	if len(req.GetSourceVolumeIds()) == 0 {
		return nil, missing("source_volume_ids")
	}
	for i, id := range req.GetSourceVolumeIds() {
		if err := checkID(fmt.Sprintf("source_volume_ids[%d]", i), id); err != nil {
			return nil, err
		}
	}
	want := slices.Clone(req.GetSourceVolumeIds())
	slices.Sort(want)
	if len(slices.Compact(slices.Clone(want))) != len(want) {
		return nil, status.Error(codes.InvalidArgument, "source_volume_ids: a volume is listed twice")
	}
	var resp *csi.VolumeGroupSnapshot
	var created []string
	err := d.store.Update(func(s *state.Data) error {
		if old := s.GroupSnapshotByName(req.GetName()); old != nil {
			have := slices.Clone(old.SourceVolumeIDs)
			slices.Sort(have)
			if !slices.Equal(have, want) {
				return fmt.Errorf("group snapshot name %q exists as %s of volumes %v: %w", req.GetName(), old.ID, old.SourceVolumeIDs, state.ErrAlreadyExists)
			}
			resp = d.groupProto(s, old)
			return nil
		}
		for _, id := range req.GetSourceVolumeIds() {
			if _, ok := s.Volumes[id]; !ok {
				return fmt.Errorf("source_volume_ids: volume %q: %w", id, state.ErrNotFound)
			}
		}
		g := &state.GroupSnapshot{ID: newID("group-"), Name: req.GetName(), SourceVolumeIDs: slices.Clone(req.GetSourceVolumeIds()),
			Parameters: copyMap(req.GetParameters()), Created: now()}
		for _, id := range req.GetSourceVolumeIds() {
			snap, err := d.takeSnapshot(s, s.Volumes[id], g.ID+"-"+id, g.ID, req.GetParameters())
			if err != nil {
				for _, c := range created {
					delete(s.Snapshots, c)
				}
				return err
			}
			created = append(created, snap.ID)
			g.SnapshotIDs = append(g.SnapshotIDs, snap.ID)
		}
		s.GroupSnapshots[g.ID] = g
		resp = d.groupProto(s, g)
		return nil
	})
	if err != nil {
		for _, c := range created {
			d.snaps.remove(c)
		}
		return nil, statusFor(err)
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: resp}, nil
}

// DeleteVolumeGroupSnapshot deletes a group and its snapshots; an unknown ID succeeds. When
// snapshot_ids is given it must name exactly the group's snapshots (spec: InvalidArgument
// "Snapshot list mismatch").
func (d *Driver) DeleteVolumeGroupSnapshot(_ context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetGroupSnapshotId()
	if err := checkID("group_snapshot_id", id); err != nil {
		return nil, err
	}
	if err := checkSnapshotIDs(req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	var removed []string
	err := d.store.Update(func(s *state.Data) error {
		g, ok := s.GroupSnapshots[id]
		if !ok {
			return nil
		}
		if err := sameSnapshots(g, req.GetSnapshotIds()); err != nil {
			return err
		}
		for _, sid := range g.SnapshotIDs {
			delete(s.Snapshots, sid)
		}
		delete(s.GroupSnapshots, id)
		removed = g.SnapshotIDs
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	for _, sid := range removed {
		d.snaps.remove(sid)
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

func checkSnapshotIDs(ids []string) error {
	for i, id := range ids {
		if err := checkID(fmt.Sprintf("snapshot_ids[%d]", i), id); err != nil {
			return err
		}
	}
	return nil
}

func sameSnapshots(g *state.GroupSnapshot, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	a, b := slices.Clone(g.SnapshotIDs), slices.Clone(ids)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		return fmt.Errorf("snapshot_ids %v do not match group snapshot %s's snapshots %v: %w", ids, g.ID, g.SnapshotIDs, state.ErrInvalid)
	}
	return nil
}

// GetVolumeGroupSnapshot returns a group snapshot and its members.
func (d *Driver) GetVolumeGroupSnapshot(_ context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetGroupSnapshotId()
	if err := checkID("group_snapshot_id", id); err != nil {
		return nil, err
	}
	if err := checkSnapshotIDs(req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	var resp *csi.VolumeGroupSnapshot
	var err error
	d.store.View(func(s *state.Data) {
		g, ok := s.GroupSnapshots[id]
		if !ok {
			err = status.Errorf(codes.NotFound, "group snapshot %q: not found", id)
			return
		}
		if err = sameSnapshots(g, req.GetSnapshotIds()); err != nil {
			err = statusFor(err)
			return
		}
		resp = d.groupProto(s, g)
	})
	if err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: resp}, nil
}
