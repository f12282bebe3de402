package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	criserver "github.com/plugsim/plugsim/cri-fake/server"
	csiserver "github.com/plugsim/plugsim/csi-fake/server"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/trace"
)

// canary is the secret: a CRI registry password (and the other AuthConfig credentials) and the
// value of every CSI secrets map. No output of either fake may carry it.
const canary = "CANARY-s3cr3t-7f3a9"

// lockedBuffer collects a fake's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func adminGET(t *testing.T, sock, path string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://x" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSecretsCanary gives the canary as every credential the CRI and CSI carry, through calls
// that succeed and calls that fail, then reads every output the fakes make: the trace files, the
// rings, the admin API's /trace and /faults, the SVG, Mermaid and text diagrams of the trace, the
// logs (csi-fake logging every call, as the sidecars do), and every file under the state and
// data directories. The canary is in none of them.
func TestSecretsCanary(t *testing.T) {
	dir := t.TempDir()
	var logs lockedBuffer
	cri, err := criserver.Start(criserver.Options{RootDir: filepath.Join(dir, "cri-root"), StateDir: filepath.Join(dir, "cri-state"),
		TraceFile: filepath.Join(dir, "cri-trace.jsonl"), AdminSocket: filepath.Join(dir, "cri-admin.sock"), StreamingAddr: "none",
		Logf: func(format string, args ...any) { fmt.Fprintf(&logs, format+"\n", args...) }})
	if err != nil {
		t.Fatal(err)
	}
	defer cri.Close()
	csiS, err := csiserver.Start(csiserver.Options{NodeID: "node-1", StateDir: filepath.Join(dir, "csi-state"),
		TraceFile: filepath.Join(dir, "csi-trace.jsonl"), AdminSocket: filepath.Join(dir, "csi-admin.sock"),
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), LogCalls: true})
	if err != nil {
		t.Fatal(err)
	}
	defer csiS.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	criConn, err := grpc.NewClient(cri.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer criConn.Close()
	img := runtimeapi.NewImageServiceClient(criConn)
	auth := &runtimeapi.AuthConfig{Username: "user", Password: canary, Auth: canary, IdentityToken: canary, RegistryToken: canary}
	for _, image := range []string{"busybox", "registry.example/missing:1", "Not A Reference"} {
		img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}, Auth: auth,
			SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}})
	}

	csiConn, err := grpc.NewClient(csiS.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer csiConn.Close()
	ctl, node := csi.NewControllerClient(csiConn), csi.NewNodeClient(csiConn)
	secrets := map[string]string{"password": canary, "token": canary}
	mount := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}
	v, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-canary", VolumeCapabilities: []*csi.VolumeCapability{mount}, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Volume.VolumeId
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	for _, call := range []func() error{
		func() error {
			_, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "", VolumeCapabilities: []*csi.VolumeCapability{mount}, Secrets: secrets})
			return err
		},
		func() error {
			_, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: mount, Secrets: secrets})
			return err
		},
		func() error {
			_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mount, Secrets: secrets})
			return err
		},
		func() error {
			_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mount, Secrets: secrets})
			return err
		},
		func() error {
			_, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, Secrets: secrets})
			return err
		},
		func() error {
			_, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, Secrets: secrets})
			return err
		},
		func() error {
			_, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: id, Name: "snap-canary", Secrets: secrets})
			return err
		},
		func() error {
			_, err := ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{Secrets: secrets})
			return err
		},
		func() error {
			_, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "no-such-volume", Secrets: secrets})
			return err
		},
	} {
		call() // failures count as much as successes: an error message must not echo a secret either
	}

	outputs := map[string]string{"logs": logs.String()}
	var all []trace.Event
	for name, s := range map[string]interface {
		Recorder() *trace.Recorder
	}{"cri-fake": cri, "csi-fake": csiS} {
		evs := s.Recorder().Events()
		b, _ := json.Marshal(evs)
		outputs[name+" ring"] = string(b)
		all = append(all, evs...)
	}
	for _, sock := range []string{"cri-admin.sock", "csi-admin.sock"} {
		outputs[sock+" /trace"] = adminGET(t, filepath.Join(dir, sock), "/trace")
		outputs[sock+" /faults"] = adminGET(t, filepath.Join(dir, sock), "/faults")
	}
	if len(all) < 10 {
		t.Fatalf("only %d events recorded", len(all))
	}
	sections := []diagram.Section{{Title: "canary", Events: all}}
	outputs["svg"] = string(diagram.SVG("canary", "", sections))
	outputs["mermaid"] = diagram.Mermaid("canary", sections)
	var text bytes.Buffer
	diagram.Text(&text, "", all)
	outputs["text"] = text.String()
	cri.Close()
	csiS.Close()
	files := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			outputs[p] = string(b)
			files++
		}
		return nil
	})
	if !strings.Contains(outputs[filepath.Join(dir, "cri-trace.jsonl")], "PullImage") || !strings.Contains(outputs[filepath.Join(dir, "csi-trace.jsonl")], "NodeStageVolume") {
		t.Fatal("the trace files lack the calls")
	}
	for _, f := range []string{"cri-trace.jsonl", "csi-trace.jsonl"} {
		if !strings.Contains(outputs[filepath.Join(dir, f)], trace.Redacted) {
			t.Fatalf("%s shows no redacted field: the secrets did not reach it", f)
		}
	}
	if !strings.Contains(outputs["logs"], "CreateVolume") {
		t.Fatalf("csi-fake logged no call:\n%s", outputs["logs"])
	}
	for name, out := range outputs {
		if i := strings.Index(out, canary); i >= 0 {
			t.Errorf("%s carries the secret: …%s…", name, out[max(0, i-120):min(len(out), i+40)])
		}
	}
	t.Logf("%d outputs searched (%d files), %d events", len(outputs), files, len(all))
}
