package driver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugsim/plugsim/csi-fake/state"
)

func now() time.Time { return time.Now().UTC() }

func snapshotProto(s *state.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:      s.ID,
		SourceVolumeId:  s.SourceVolumeID,
		SizeBytes:       s.SizeBytes,
		CreationTime:    timestamppb.New(s.Created),
		ReadyToUse:      true, // the copy is complete when CreateSnapshot returns
		GroupSnapshotId: s.GroupID,
		// No accessible_topology: a snapshot is a copy in the controller's data directory and
		// any volume can be restored from it anywhere, which is what an unset field tells the
		// CO (spec: "the CO MAY assume the snapshot is equally usable from all topologies").
	}
}

// takeSnapshot copies a volume's data into a new snapshot; the caller holds the store lock.
func (d *Driver) takeSnapshot(s *state.Data, v *state.Volume, name, group string, params map[string]string) (*state.Snapshot, error) {
	id := newID("snap-")
	if _, err := d.snaps.create(id, v.AccessType, v.CapacityBytes, &d.vols, v.ID, true); err != nil {
		d.snaps.remove(id)
		return nil, fmt.Errorf("copy volume %s into snapshot: %w", v.ID, err)
	}
	snap := &state.Snapshot{
		ID: id, Name: name, Seq: s.Seq(), SourceVolumeID: v.ID, GroupID: group,
		SizeBytes: v.CapacityBytes, AccessType: v.AccessType,
		Parameters: copyMap(params), Created: now(),
	}
	s.Snapshots[id] = snap
	return snap, nil
}

// CreateSnapshot copies a volume's data. The same name and source returns the existing snapshot;
// the same name with another source is AlreadyExists.
func (d *Driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, missing("name")
	}
	if err := checkID("source_volume_id", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	if req.GetAccessibilityRequirements() != nil {
		// The snapshot is usable everywhere (see snapshotProto), which satisfies any
		// requirement the driver can serve at all; one it cannot serve is refused.
		if _, err := d.pickTopology(req.GetAccessibilityRequirements()); err != nil {
			return nil, statusFor(err)
		}
	}
	var resp *csi.Snapshot
	var created string
	err := d.store.Update(func(s *state.Data) error {
		if old := s.SnapshotByName(req.GetName()); old != nil {
			if old.SourceVolumeID != req.GetSourceVolumeId() {
				return fmt.Errorf("snapshot name %q exists as %s of volume %s, not of %s: %w",
					req.GetName(), old.ID, old.SourceVolumeID, req.GetSourceVolumeId(), state.ErrAlreadyExists)
			}
			resp = snapshotProto(old)
			return nil
		}
		v, ok := s.Volumes[req.GetSourceVolumeId()]
		if !ok {
			return fmt.Errorf("source_volume_id %q: %w", req.GetSourceVolumeId(), state.ErrNotFound)
		}
		snap, err := d.takeSnapshot(s, v, req.GetName(), "", req.GetParameters())
		if err != nil {
			return err
		}
		created = snap.ID
		resp = snapshotProto(snap)
		return nil
	})
	if err != nil {
		if created != "" {
			d.snaps.remove(created)
		}
		return nil, statusFor(err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: resp}, nil
}

// DeleteSnapshot deletes a snapshot; an unknown ID succeeds. A member of a group snapshot is
// deleted only with its group (spec: InvalidArgument "Snapshot is part of a group").
func (d *Driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetSnapshotId()
	if err := checkID("snapshot_id", id); err != nil {
		return nil, err
	}
	var found bool
	err := d.store.Update(func(s *state.Data) error {
		snap, ok := s.Snapshots[id]
		if !ok {
			return nil
		}
		if snap.GroupID != "" {
			return fmt.Errorf("snapshot %s is part of group snapshot %s; call DeleteVolumeGroupSnapshot: %w", id, snap.GroupID, state.ErrInvalid)
		}
		delete(s.Snapshots, id)
		found = true
		return nil
	})
	if err != nil {
		return nil, statusFor(err)
	}
	if found {
		d.snaps.remove(id)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists snapshots in creation order, filtered by snapshot_id or source_volume_id
// (an unknown one gives an empty list, not an error), paginated like ListVolumes.
func (d *Driver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d must not be negative", req.GetMaxEntries())
	}
	if err := checkOptionalID("snapshot_id", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	if err := checkOptionalID("source_volume_id", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{}
	var err error
	d.store.View(func(s *state.Data) {
		var after uint64
		if after, err = parseToken(req.GetStartingToken(), s.NextSeq); err != nil {
			return
		}
		snaps := s.SortedSnapshots()
		i := sort.Search(len(snaps), func(i int) bool { return snaps[i].Seq > after })
		var last uint64
		for ; i < len(snaps); i++ {
			sn := snaps[i]
			if req.GetSnapshotId() != "" && sn.ID != req.GetSnapshotId() {
				continue
			}
			if req.GetSourceVolumeId() != "" && sn.SourceVolumeID != req.GetSourceVolumeId() {
				continue
			}
			if req.GetMaxEntries() > 0 && len(resp.Entries) == int(req.GetMaxEntries()) {
				resp.NextToken = strconv.FormatUint(last, 10)
				break
			}
			resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snapshotProto(sn)})
			last = sn.Seq
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// GetSnapshot returns one snapshot.
func (d *Driver) GetSnapshot(_ context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := d.controllerOnly(); err != nil {
		return nil, err
	}
	id := req.GetSnapshotId()
	if err := checkID("snapshot_id", id); err != nil {
		return nil, err
	}
	var resp *csi.Snapshot
	d.store.View(func(s *state.Data) {
		if sn, ok := s.Snapshots[id]; ok {
			resp = snapshotProto(sn)
		}
	})
	if resp == nil {
		return nil, status.Errorf(codes.NotFound, "snapshot %q: not found", id)
	}
	return &csi.GetSnapshotResponse{Snapshot: resp}, nil
}
