// Package driver implements the CSI services of csi-fake (spec v1.13.0): Identity, Controller,
// Node and GroupController over one state store, plus the kubelet's plugin registration API. It
// follows the shape of csi-driver-host-path's pkg/hostpath: one file per service, one Driver type.
//
// Handlers read like the protocol: validate the request (InvalidArgument names the field), look up
// and change the state inside one Store.Update, answer. Errors below the handlers wrap the state
// package's sentinel errors; the handler turns them into gRPC codes with statusFor.
package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/state"
)

// Mode selects which CSI services a csi-fake process serves, the way a real deployment splits
// them: the controller Deployment serves the controller, the node DaemonSet the node service.
type Mode string

const (
	ModeAll        Mode = "all"
	ModeController Mode = "controller"
	ModeNode       Mode = "node"
)

// MountMode selects what NodePublishVolume does to the target path.
type MountMode string

const (
	// MountFake creates the target (a directory, or a file for block volumes) and records the
	// publish; nothing is mounted, so it needs no privileges.
	MountFake MountMode = "fake"
	// MountBind bind-mounts the volume's backing directory (or file) onto the target, so data
	// written through one publish is seen through the next. Needs root (CAP_SYS_ADMIN).
	MountBind MountMode = "bind"
)

// Defaults.
const (
	DefaultDriverName = "csi.plugsim.dev"
	DefaultCapacity   = int64(1) << 40 // 1 TiB
	// DefaultVolumeSize is used when CreateVolume has no capacity range.
	DefaultVolumeSize = int64(1) << 30
	// DefaultEphemeralSize is the size of an inline ephemeral volume without a "size" attribute
	// (hostpath uses 100Mi as well).
	DefaultEphemeralSize = int64(100) << 20
	// NodeTopologyKey is the topology key every node reports with its node ID as value.
	NodeTopologyKey = "topology.plugsim.dev/node"
)

// Volume context keys csi-fake sets in CreateVolume and reads on the node side. A node in
// node-only mode has no controller state, so the volume context is how it learns size and type.
const (
	ContextSize       = "plugsim.dev/size"
	ContextAccessType = "plugsim.dev/access-type"
	// ContextEphemeral is set by kubelet for inline ephemeral volumes.
	ContextEphemeral = "csi.storage.k8s.io/ephemeral"
	// EphemeralSizeAttribute is the volumeAttributes key that sizes an ephemeral volume.
	EphemeralSizeAttribute = "size"
)

// Config configures a Driver.
type Config struct {
	Name   string
	NodeID string
	Mode   Mode
	// DataDir holds the volumes' backing data (volumes/, snapshots/). Required.
	DataDir           string
	Store             *state.Store
	Capacity          int64
	MaxVolumesPerNode int64
	// Topology is added to the node's topology segment ({NodeTopologyKey: NodeID} is in it too,
	// unless NoNodeTopology).
	Topology map[string]string
	// NoNodeTopology leaves NodeTopologyKey out of the node's segment, so only Topology is
	// reported: storage every node with the same Topology reaches, as network-attached storage
	// (a SAN, a cloud disk within one zone) is. The external-provisioner then gives a PV a node
	// affinity on Topology's keys, which every such node satisfies, instead of pinning it to the
	// node whose NodeGetInfo it aggregated. The nodes must then share the volumes' data (their
	// Config.DataDir), or a volume moved to another node comes up empty there.
	NoNodeTopology bool
	// AttachRequired advertises PUBLISH_UNPUBLISH_VOLUME; without it ControllerPublishVolume is
	// Unimplemented (CSIDriver attachRequired: false).
	AttachRequired bool
	// EphemeralOnly serves only the node service and only inline ephemeral volumes.
	EphemeralOnly bool
	Mount         MountMode
	// KnownNodes are shell patterns of node IDs ControllerPublishVolume accepts; empty means only
	// NodeID. "*" accepts every node (a controller Deployment that cannot list nodes).
	KnownNodes []string
	// KubeletEndpoint is the CSI socket path as the kubelet sees it, returned by registration
	// GetInfo; empty means the served socket path.
	KubeletEndpoint string
	Log             *slog.Logger
}

// Driver serves the CSI services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	csi.UnimplementedGroupControllerServer
	csi.UnimplementedSnapshotMetadataServer

	cfg   Config
	store *state.Store
	log   *slog.Logger
	reg   registrationStatus
	// vols and snaps are <DataDir>/volumes and <DataDir>/snapshots (see data.go).
	vols, snaps area
}

// New checks the configuration and returns a driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultDriverName
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeAll
	}
	switch cfg.Mode {
	case ModeAll, ModeController, ModeNode:
	default:
		return nil, fmt.Errorf("mode %q: want all, controller or node", cfg.Mode)
	}
	if cfg.EphemeralOnly && cfg.Mode == ModeController {
		return nil, errors.New("ephemeral-only serves the node service only; it cannot be combined with mode controller")
	}
	if cfg.Mount == "" {
		cfg.Mount = MountFake
	}
	if cfg.Mount != MountFake && cfg.Mount != MountBind {
		return nil, fmt.Errorf("mount %q: want fake or bind", cfg.Mount)
	}
	if cfg.Mount == MountBind && os.Geteuid() != 0 {
		return nil, errors.New("--mount=bind needs root (bind mounts need CAP_SYS_ADMIN); use --mount=fake")
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Capacity < 0 || cfg.MaxVolumesPerNode < 0 {
		return nil, errors.New("capacity and max volumes per node must not be negative")
	}
	if cfg.NodeID == "" && cfg.Mode != ModeController {
		return nil, errors.New("a node ID is required to serve the node service (--node-id)")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory is required")
	}
	if cfg.Store == nil {
		s, err := state.Open("")
		if err != nil {
			return nil, err
		}
		cfg.Store = s
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for _, p := range cfg.KnownNodes {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("known node pattern %q: %w", p, err)
		}
	}
	vols, err := openArea(filepath.Join(cfg.DataDir, "volumes"))
	if err != nil {
		return nil, err
	}
	snaps, err := openArea(filepath.Join(cfg.DataDir, "snapshots"))
	if err != nil {
		vols.root.Close()
		return nil, err
	}
	return &Driver{cfg: cfg, store: cfg.Store, log: cfg.Log, vols: vols, snaps: snaps}, nil
}

// Close releases the data directory. The driver must not be called afterwards.
func (d *Driver) Close() error {
	return errors.Join(d.vols.root.Close(), d.snaps.root.Close())
}

// Config returns the driver's configuration (with defaults applied).
func (d *Driver) Config() Config { return d.cfg }

// Store returns the driver's state store.
func (d *Driver) Store() *state.Store { return d.store }

func (d *Driver) servesController() bool { return d.cfg.Mode != ModeNode && !d.cfg.EphemeralOnly }
func (d *Driver) servesNode() bool       { return d.cfg.Mode != ModeController }

// nodeTopology is the topology segment of this node.
func (d *Driver) nodeTopology() map[string]string {
	t := map[string]string{}
	for k, v := range d.cfg.Topology {
		t[k] = v
	}
	if d.cfg.NodeID != "" && !d.cfg.NoNodeTopology {
		t[NodeTopologyKey] = d.cfg.NodeID
	}
	return t
}

// segmentFits reports whether a requested topology segment can be served: every key the driver
// knows must have the driver's value. Keys the driver does not know (the node key of another node,
// in controller mode) do not rule a segment out.
func (d *Driver) segmentFits(seg map[string]string) bool {
	own := d.nodeTopology()
	if d.cfg.Mode == ModeController {
		delete(own, NodeTopologyKey)
	}
	for k, v := range seg {
		if want, ok := own[k]; ok && want != v {
			return false
		}
	}
	return true
}

// pickTopology chooses where a volume (or snapshot) is accessible: the first preferred segment
// that is also allowed, else the first allowed requisite segment (spec "CreateVolume",
// accessibility_requirements). No requirements means the driver's own segment.
func (d *Driver) pickTopology(req *csi.TopologyRequirement) ([]map[string]string, error) {
	if req == nil || (len(req.GetRequisite()) == 0 && len(req.GetPreferred()) == 0) {
		if own := d.nodeTopology(); len(own) > 0 && d.cfg.Mode != ModeController {
			return []map[string]string{own}, nil
		}
		return nil, nil
	}
	inRequisite := func(seg map[string]string) bool {
		if len(req.GetRequisite()) == 0 {
			return true
		}
		for _, r := range req.GetRequisite() {
			if equalMaps(r.GetSegments(), seg) {
				return true
			}
		}
		return false
	}
	for _, p := range req.GetPreferred() {
		if inRequisite(p.GetSegments()) && d.segmentFits(p.GetSegments()) {
			return []map[string]string{copyMap(p.GetSegments())}, nil
		}
	}
	for _, r := range req.GetRequisite() {
		if d.segmentFits(r.GetSegments()) {
			return []map[string]string{copyMap(r.GetSegments())}, nil
		}
	}
	return nil, fmt.Errorf("no requisite topology segment can be served by this driver (its topology is %v): %w", d.nodeTopology(), state.ErrExhausted)
}

func (d *Driver) nodeKnown(node string) bool {
	if len(d.cfg.KnownNodes) == 0 {
		return node == d.cfg.NodeID
	}
	for _, p := range d.cfg.KnownNodes {
		if ok, _ := path.Match(p, node); ok {
			return true
		}
	}
	return false
}

// statusFor maps an error from below the handlers to a gRPC status.
func statusFor(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, state.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, state.ErrAlreadyExists):
		code = codes.AlreadyExists
	case errors.Is(err, state.ErrFailedPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, state.ErrExhausted):
		code = codes.ResourceExhausted
	case errors.Is(err, state.ErrOutOfRange):
		code = codes.OutOfRange
	case errors.Is(err, state.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func missing(field string) error {
	return status.Errorf(codes.InvalidArgument, "%s is required", field)
}

// checkID checks a volume, snapshot or group snapshot ID from a request against state.CheckID in
// every RPC and every mode, before any lookup: an ID becomes a file name under the data directory
// (and a node process adopts IDs it has never seen), so a bad one is InvalidArgument with the
// reason, never NotFound or a path. An empty one is "field is required".
func checkID(field, id string) error {
	if id == "" {
		return missing(field)
	}
	if err := state.CheckID(id); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s %s %v", field, state.QuoteID(id), err)
	}
	return nil
}

// checkOptionalID is checkID for a field that may be left empty (the ListSnapshots filters).
func checkOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return checkID(field, id)
}

func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func topologyProto(t []map[string]string) []*csi.Topology {
	var out []*csi.Topology
	for _, seg := range t {
		out = append(out, &csi.Topology{Segments: copyMap(seg)})
	}
	return out
}

// capabilityOf converts and checks a VolumeCapability.
func capabilityOf(field string, c *csi.VolumeCapability) (state.Capability, error) {
	if c == nil {
		return state.Capability{}, missing(field)
	}
	var out state.Capability
	switch {
	case c.GetMount() != nil:
		out.AccessType = state.AccessMount
		out.FsType = c.GetMount().GetFsType()
		out.MountFlags = c.GetMount().GetMountFlags()
	case c.GetBlock() != nil:
		out.AccessType = state.AccessBlock
	default:
		return out, status.Errorf(codes.InvalidArgument, "%s: access_type must be mount or block", field)
	}
	mode := c.GetAccessMode().GetMode()
	if mode == csi.VolumeCapability_AccessMode_UNKNOWN {
		return out, status.Errorf(codes.InvalidArgument, "%s: access_mode is required", field)
	}
	if _, ok := csi.VolumeCapability_AccessMode_Mode_name[int32(mode)]; !ok {
		return out, status.Errorf(codes.InvalidArgument, "%s: unknown access mode %d", field, mode)
	}
	out.AccessMode = mode.String()
	return out, nil
}

func capabilitiesOf(field string, cs []*csi.VolumeCapability) ([]state.Capability, error) {
	if len(cs) == 0 {
		return nil, missing(field)
	}
	out := make([]state.Capability, 0, len(cs))
	accessType := ""
	for i, c := range cs {
		sc, err := capabilityOf(fmt.Sprintf("%s[%d]", field, i), c)
		if err != nil {
			return nil, err
		}
		if accessType != "" && sc.AccessType != accessType {
			return nil, status.Errorf(codes.InvalidArgument, "%s: mixes mount and block access types; a volume is one or the other", field)
		}
		accessType = sc.AccessType
		out = append(out, sc)
	}
	return out, nil
}

// singleNode reports whether an access mode allows one node only.
func singleNode(mode string) bool {
	return strings.HasPrefix(mode, "SINGLE_NODE_")
}

func hasMode(caps []state.Capability, mode string) bool {
	for _, c := range caps {
		if c.AccessMode == mode {
			return true
		}
	}
	return false
}

// volumeSingleNode reports whether any of a volume's access modes confines it to one node.
func volumeSingleNode(v *state.Volume) bool {
	for _, c := range v.Capabilities {
		if !singleNode(c.AccessMode) {
			return false
		}
	}
	return len(v.Capabilities) > 0
}
