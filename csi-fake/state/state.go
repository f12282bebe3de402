// Package state holds what csi-fake knows: volumes, snapshots, group snapshots (the controller's
// view) and the node's stage/publish records, with optional JSON persistence.
//
// Like csi-driver-host-path's pkg/state, everything is one JSON document (<state-dir>/state.json)
// rewritten on every change. Unlike hostpath (which uses os.WriteFile), the file is replaced
// atomically: write to a temporary file, fsync, rename over the old one, fsync the directory, so a
// crash leaves either the old or the new state, never half of one. A file that does not parse is
// reported as a CorruptError and never silently replaced (hostpath issues #55 and #251 are about
// state lost across restarts; silently starting empty would repeat them).
package state

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Errors the handlers map to gRPC codes. They are wrapped with a message naming the input.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists with different attributes")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrExhausted          = errors.New("resource exhausted")
	ErrOutOfRange         = errors.New("out of range")
	ErrInvalid            = errors.New("invalid argument")
)

// Access types of a volume.
const (
	AccessMount = "mount"
	AccessBlock = "block"
)

// Capability is a CSI VolumeCapability in a form that persists: the access type and the access
// mode name (csi.VolumeCapability_AccessMode_Mode), plus the mount options for mount volumes.
type Capability struct {
	AccessType string   `json:"accessType"`
	AccessMode string   `json:"accessMode"`
	FsType     string   `json:"fsType,omitempty"`
	MountFlags []string `json:"mountFlags,omitempty"`
}

// Attachment is a ControllerPublishVolume of a volume to a node.
type Attachment struct {
	ReadOnly   bool   `json:"readOnly"`
	AccessMode string `json:"accessMode"`
}

// Volume is a volume as the controller service knows it.
type Volume struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Seq orders volumes by creation; list tokens refer to it.
	Seq               uint64              `json:"seq"`
	CapacityBytes     int64               `json:"capacityBytes"`
	AccessType        string              `json:"accessType"`
	Capabilities      []Capability        `json:"capabilities"`
	Parameters        map[string]string   `json:"parameters,omitempty"`
	MutableParameters map[string]string   `json:"mutableParameters,omitempty"`
	Context           map[string]string   `json:"context,omitempty"`
	SourceSnapshotID  string              `json:"sourceSnapshotId,omitempty"`
	SourceVolumeID    string              `json:"sourceVolumeId,omitempty"`
	Topology          []map[string]string `json:"topology,omitempty"`
	Created           time.Time           `json:"created"`
	// DataCreated is set once the backing data exists (a mount volume's directory is created on
	// first use); only then is a missing directory a health problem.
	DataCreated bool `json:"dataCreated,omitempty"`
	// Published maps node IDs to the attachment made by ControllerPublishVolume.
	Published map[string]Attachment `json:"published,omitempty"`
}

// Snapshot is a snapshot of one volume.
type Snapshot struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Seq            uint64            `json:"seq"`
	SourceVolumeID string            `json:"sourceVolumeId"`
	GroupID        string            `json:"groupId,omitempty"`
	SizeBytes      int64             `json:"sizeBytes"`
	AccessType     string            `json:"accessType"`
	Parameters     map[string]string `json:"parameters,omitempty"`
	Created        time.Time         `json:"created"`
}

// GroupSnapshot is a VolumeGroupSnapshot: snapshots of several volumes taken together.
type GroupSnapshot struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	SourceVolumeIDs []string          `json:"sourceVolumeIds"`
	SnapshotIDs     []string          `json:"snapshotIds"`
	Parameters      map[string]string `json:"parameters,omitempty"`
	Created         time.Time         `json:"created"`
}

// Target is one NodePublishVolume of a volume at a target path.
type Target struct {
	ReadOnly   bool   `json:"readOnly"`
	AccessType string `json:"accessType"`
	AccessMode string `json:"accessMode"`
	// Bind is true when the target is a bind mount of the backing data (--mount=bind).
	Bind bool `json:"bind,omitempty"`
	// Made identifies the directory or file NodePublishVolume created at the target; nil when the
	// target existed before. NodeUnpublishVolume removes the target only while it is still that
	// inode (spec: "the SP MUST delete the file or directory it created at this path"), so it
	// never removes what the CO or anyone else put there.
	Made *FileID `json:"made,omitempty"`
}

// FileID identifies a file or directory. The inode number alone does not: ext4 and tmpfs hand a
// freed number to the next file created, so a target removed and made again by someone else
// often has the old number. Its type and birth time (statx btime) tell them apart.
type FileID struct {
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Type uint32 `json:"type"` // S_IFDIR, S_IFREG ...
	// Birth is the creation time in nanoseconds since the epoch; 0 where the file system
	// records none.
	Birth int64 `json:"birth,omitempty"`
}

// NodeVolume is the node service's record of a volume on this node: where it is staged and
// published. In node-only mode it is all the node knows about the volume (the controller's
// records live in another process, as in a real deployment).
type NodeVolume struct {
	VolumeID string `json:"volumeId"`
	// Ephemeral volumes were created by NodePublishVolume from the volume context and are
	// deleted by NodeUnpublishVolume.
	Ephemeral       bool              `json:"ephemeral,omitempty"`
	CapacityBytes   int64             `json:"capacityBytes"`
	AccessType      string            `json:"accessType"`
	StagingPath     string            `json:"stagingPath,omitempty"`
	StageCapability *Capability       `json:"stageCapability,omitempty"`
	Targets         map[string]Target `json:"targets,omitempty"`
	// Context is the volume context the CO passed on stage or publish.
	Context map[string]string `json:"context,omitempty"`
}

// InUse reports whether the volume is staged or published on the node.
func (n *NodeVolume) InUse() bool { return n.StagingPath != "" || len(n.Targets) > 0 }

// Data is the whole state.
type Data struct {
	Version        int                       `json:"version"`
	NextSeq        uint64                    `json:"nextSeq"`
	Volumes        map[string]*Volume        `json:"volumes"`
	Snapshots      map[string]*Snapshot      `json:"snapshots"`
	GroupSnapshots map[string]*GroupSnapshot `json:"groupSnapshots"`
	Node           map[string]*NodeVolume    `json:"node"`
}

// CurrentVersion is the version of the state file format.
const CurrentVersion = 1

func newData() *Data {
	d := &Data{Version: CurrentVersion}
	d.init()
	return d
}

func (d *Data) init() {
	if d.Volumes == nil {
		d.Volumes = map[string]*Volume{}
	}
	if d.Snapshots == nil {
		d.Snapshots = map[string]*Snapshot{}
	}
	if d.GroupSnapshots == nil {
		d.GroupSnapshots = map[string]*GroupSnapshot{}
	}
	if d.Node == nil {
		d.Node = map[string]*NodeVolume{}
	}
}

// Seq returns the next creation sequence number.
func (d *Data) Seq() uint64 {
	d.NextSeq++
	return d.NextSeq
}

// VolumeByName finds a volume by its CreateVolume name.
func (d *Data) VolumeByName(name string) *Volume {
	for _, v := range d.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// SnapshotByName finds a snapshot by its CreateSnapshot name.
func (d *Data) SnapshotByName(name string) *Snapshot {
	for _, s := range d.Snapshots {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// GroupSnapshotByName finds a group snapshot by its name.
func (d *Data) GroupSnapshotByName(name string) *GroupSnapshot {
	for _, g := range d.GroupSnapshots {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// SortedVolumes returns the volumes in creation order.
func (d *Data) SortedVolumes() []*Volume {
	out := make([]*Volume, 0, len(d.Volumes))
	for _, v := range d.Volumes {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// SortedSnapshots returns the snapshots in creation order.
func (d *Data) SortedSnapshots() []*Snapshot {
	out := make([]*Snapshot, 0, len(d.Snapshots))
	for _, s := range d.Snapshots {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// UsedBytes is the capacity taken by volumes: the controller's volumes and the node's inline
// ephemeral volumes, which NodePublishVolume creates from the same pool (snapshots are not
// charged, as in hostpath). Volumes a node process adopted belong to the controller's pool.
//
// The sum saturates at math.MaxInt64 (and a negative size counts as 0): sizes come from clients
// and from a state file, and a wrapped sum would turn a full pool into a huge free one (issue 17).
func (d *Data) UsedBytes() int64 { return d.UsedBytesExcept("") }

// UsedBytesExcept is UsedBytes without the controller volume id, what a volume's expansion may
// grow into besides what it already holds.
func (d *Data) UsedBytesExcept(id string) int64 {
	var n int64
	for vid, v := range d.Volumes {
		if vid != id {
			n = addSizes(n, v.CapacityBytes)
		}
	}
	for _, nv := range d.Node {
		if nv.Ephemeral {
			n = addSizes(n, nv.CapacityBytes)
		}
	}
	return n
}

// addSizes adds a size to a non-negative sum, saturating at math.MaxInt64.
func addSizes(sum, size int64) int64 {
	if size <= 0 {
		return sum
	}
	if size > math.MaxInt64-sum {
		return math.MaxInt64
	}
	return sum + size
}

// PublishedOn counts the volumes controller-published to a node.
func (d *Data) PublishedOn(node string) int64 {
	var n int64
	for _, v := range d.Volumes {
		if _, ok := v.Published[node]; ok {
			n++
		}
	}
	return n
}

// CorruptError reports a state file that exists but cannot be read back. csi-fake refuses to start
// rather than replace it.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state file %s is corrupt: %v; csi-fake does not overwrite it: repair it, or move it away to start empty", e.Path, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// ValidateID checks an ID given from outside (a fixture) with the rule every RPC applies
// (CheckID), so a fixture can hold exactly the IDs a client could have sent.
func ValidateID(id string) error {
	if err := CheckID(id); err != nil {
		return fmt.Errorf("ID %s %v", QuoteID(id), err)
	}
	return nil
}
