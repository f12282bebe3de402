package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/plugsim/plugsim/csi-fake/driver"
	"github.com/plugsim/plugsim/csi-fake/state"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

const gib = int64(1) << 30

func start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.NodeID == "" {
		opts.NodeID = "node-1"
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dial connects to a unix endpoint the way kubelet and the sidecars do.
func dial(t testing.TB, ep string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", ep, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var snw = &csi.VolumeCapability{
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
}

// TestRegistrationAsKubelet plays the kubelet's plugin watcher over the sockets: GetInfo on the
// registration socket, NodeGetInfo on the endpoint it returned, NotifyRegistrationStatus with the
// failure a standalone kubelet reports; csi-fake records it and keeps serving.
func TestRegistrationAsKubelet(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{Endpoint: "unix://" + filepath.Join(dir, "plugins", "csi.sock"), Register: true,
		PluginRegistryDir: filepath.Join(dir, "plugins_registry"), NodeID: "kubelet-node", MaxVolumesPerNode: 7})
	ctx := tctx(t)
	regSock := filepath.Join(dir, "plugins_registry", "csi.plugsim.dev-reg.sock")
	if s.RegistrationEndpoint() != "unix://"+regSock {
		t.Fatalf("registration endpoint %s, want %s", s.RegistrationEndpoint(), regSock)
	}
	if fi, err := os.Stat(regSock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("registration socket: %v, %v", fi, err)
	}
	reg := registerapi.NewRegistrationClient(dial(t, s.RegistrationEndpoint()))
	infoCtx, cancel := context.WithTimeout(ctx, time.Second) // kubelet's GetInfo timeout
	info, err := reg.GetInfo(infoCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "csi.plugsim.dev" || len(info.GetSupportedVersions()) == 0 ||
		!strings.HasPrefix(info.GetSupportedVersions()[0], "1.") {
		t.Fatalf("GetInfo = %v", info)
	}
	// Kubelet dials the endpoint from GetInfo (a path, not a URL) and calls NodeGetInfo.
	ni, err := csi.NewNodeClient(dial(t, "unix://"+info.GetEndpoint())).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatalf("NodeGetInfo on %s: %v", info.GetEndpoint(), err)
	}
	if ni.GetNodeId() != "kubelet-node" || ni.GetMaxVolumesPerNode() != 7 || ni.GetAccessibleTopology().GetSegments()["topology.plugsim.dev/node"] != "kubelet-node" {
		t.Fatalf("NodeGetInfo = %v", ni)
	}
	msg := "RegisterPlugin error -- plugin registration failed with err: error updating Node object with CSI driver node info: error getting kube client"
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: msg}); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
	if st := s.RegistrationStatus(); st.Notified != 1 || st.Registered || st.Error != msg {
		t.Fatalf("RegistrationStatus = %+v", st)
	}
	if _, err := reg.GetInfo(ctx, &registerapi.InfoRequest{}); err != nil {
		t.Fatalf("GetInfo after a failed registration: %v (csi-fake must keep serving)", err)
	}
	var regEvents int
	for _, ev := range s.Recorder().Events() {
		if ev.Interface == trace.Registration {
			regEvents++
		}
	}
	if regEvents != 3 {
		t.Errorf("%d registration calls traced, want 3", regEvents)
	}
}

// TestRestartKeepsState creates volumes, snapshots, a group snapshot, attachments, stage and
// publish records, stops the server and starts a new one on the same --state-dir: everything is
// still there and the lifecycle continues where it stopped.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	stateDir, pods, staging := filepath.Join(dir, "state"), filepath.Join(dir, "pods"), filepath.Join(dir, "staging")
	os.MkdirAll(pods, 0o755)
	os.MkdirAll(staging, 0o755)
	opts := Options{Endpoint: "unix://" + filepath.Join(dir, "csi.sock"), StateDir: stateDir, NodeID: "node-1"}
	s1, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, s1.Endpoint())
	cc, nc, gc := csi.NewControllerClient(conn), csi.NewNodeClient(conn), csi.NewGroupControllerClient(conn)
	ctx := tctx(t)
	mustOK := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "keep", VolumeCapabilities: []*csi.VolumeCapability{snw},
		CapacityRange: &csi.CapacityRange{RequiredBytes: gib}, MutableParameters: map[string]string{"tier": "premium"}})
	mustOK(v, err)
	id := v.GetVolume().GetVolumeId()
	os.Mkdir(filepath.Join(stateDir, "volumes", id), 0o755) // as a bind publish would create it
	os.WriteFile(filepath.Join(stateDir, "volumes", id, "file"), []byte("data"), 0o644)
	snap, err := cc.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "keep-snap", SourceVolumeId: id})
	mustOK(snap, err)
	grp, err := gc.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "keep-group", SourceVolumeIds: []string{id}})
	mustOK(grp, err)
	mustOK(cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: snw}))
	mustOK(nc.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: snw}))
	target := filepath.Join(pods, "t")
	mustOK(nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw}))
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := start(t, opts)
	conn = dial(t, s2.Endpoint())
	cc, nc, gc = csi.NewControllerClient(conn), csi.NewNodeClient(conn), csi.NewGroupControllerClient(conn)
	got, err := cc.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
	mustOK(got, err)
	if got.GetStatus().GetPublishedNodeIds()[0] != "node-1" || got.GetVolume().GetCapacityBytes() != gib {
		t.Errorf("volume after restart: %v", got)
	}
	snaps, err := cc.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: id})
	mustOK(snaps, err)
	if len(snaps.GetEntries()) != 2 { // the snapshot and the group member
		t.Errorf("%d snapshots after restart, want 2", len(snaps.GetEntries()))
	}
	mustOK(gc.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: grp.GetGroupSnapshot().GetGroupSnapshotId()}))
	// The node still knows the publish: stats work at the target, a repeated publish is
	// idempotent, and the teardown succeeds in order.
	mustOK(nc.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}))
	mustOK(nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: snw}))
	if _, err := nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("unstage while published after restart: %v, want FailedPrecondition", err)
	}
	mustOK(nc.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}))
	mustOK(nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}))
	mustOK(cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}))
	restored, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{snw},
		CapacityRange: &csi.CapacityRange{RequiredBytes: gib}, VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}})
	mustOK(restored, err)
	if b, err := os.ReadFile(filepath.Join(stateDir, "volumes", restored.GetVolume().GetVolumeId(), "file")); err != nil || string(b) != "data" {
		t.Errorf("data restored from a snapshot taken before the restart: %q, %v", b, err)
	}
}

func TestCorruptStateRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, state.FileName), []byte(`{"version":1,"volumes":{`), 0o600)
	_, err := Start(Options{Endpoint: "unix://" + filepath.Join(dir, "csi.sock"), StateDir: dir, NodeID: "n"})
	var ce *state.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Start = %v, want a CorruptError", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, state.FileName)) || !strings.Contains(err.Error(), "does not overwrite") {
		t.Errorf("message does not say which file and what to do: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "csi.sock")); !os.IsNotExist(err) {
		t.Errorf("a socket was left behind: %v", err)
	}
}

// TestTraceAndFaults: calls are traced with secrets redacted, an injected fault is returned and
// traced, and a zero Options serves on a temp socket.
func TestTraceAndFaults(t *testing.T) {
	s := start(t, Options{})
	if !strings.HasPrefix(s.Endpoint(), "unix://") {
		t.Fatalf("endpoint %q", s.Endpoint())
	}
	if _, err := s.Faults().Add(faults.Rule{Method: "CreateVolume", Match: map[string]string{"name": "doomed"}, Code: "Unavailable", Times: 1}); err != nil {
		t.Fatal(err)
	}
	cc := csi.NewControllerClient(dial(t, s.Endpoint()))
	ctx := tctx(t)
	req := &csi.CreateVolumeRequest{Name: "doomed", VolumeCapabilities: []*csi.VolumeCapability{snw}, Secrets: map[string]string{"password": "hunter2"}}
	if _, err := cc.CreateVolume(ctx, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("first CreateVolume: %v, want the injected Unavailable", err)
	}
	if _, err := cc.CreateVolume(ctx, req); err != nil {
		t.Fatalf("second CreateVolume (rule used up): %v", err)
	}
	evs := s.Recorder().Events()
	if len(evs) != 2 || evs[0].Code != "Unavailable" || evs[1].Code != "OK" || evs[0].Caller != "csi-controller" {
		t.Fatalf("trace: %+v", evs)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Request), "hunter2") || !strings.Contains(string(ev.Request), trace.Redacted) {
			t.Errorf("secret not redacted in the trace: %s", ev.Request)
		}
	}
}

// TestTraversalIDOverGRPC is issue 12's reproduction over the socket, as a client sends it: in
// --mode node with a state directory, and in the default mode, an inline ephemeral
// NodePublishVolume whose volume_id climbs out of the data directory, then NodeUnpublishVolume.
// Both are InvalidArgument and the planted directory and its file stay.
func TestTraversalIDOverGRPC(t *testing.T) {
	for _, mode := range []driver.Mode{driver.ModeNode, driver.ModeAll} {
		t.Run(string(mode), func(t *testing.T) {
			victim := filepath.Join(t.TempDir(), "plugsim-victim")
			os.Mkdir(victim, 0o755)
			os.WriteFile(filepath.Join(victim, "file"), []byte("keep"), 0o644)
			s := start(t, Options{Mode: mode, StateDir: t.TempDir()})
			node := csi.NewNodeClient(dial(t, s.Endpoint()))
			ctx := tctx(t)
			id := "../../../../../../.." + victim
			target := filepath.Join(t.TempDir(), "mount")
			_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: snw,
				VolumeContext: map[string]string{"csi.storage.k8s.io/ephemeral": "true"}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "contains '/'") {
				t.Fatalf("NodePublishVolume: %v, want InvalidArgument saying why", err)
			}
			_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("NodeUnpublishVolume: %v, want InvalidArgument", err)
			}
			if b, err := os.ReadFile(filepath.Join(victim, "file")); err != nil || string(b) != "keep" {
				t.Fatalf("the victim's file: %q, %v", b, err)
			}
		})
	}
}
