package trace

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRingKeepsNewestInOrder(t *testing.T) {
	r, err := New(Options{Capacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c", "d", "e"} {
		r.Record(Event{Method: m})
	}
	var got []string
	for _, ev := range r.Events() {
		got = append(got, ev.Method)
	}
	if strings.Join(got, "") != "cde" {
		t.Fatalf("ring holds %v, want [c d e]", got)
	}
	if evs := r.Events(); evs[2].Seq != 5 {
		t.Fatalf("last seq = %d, want 5", evs[2].Seq)
	}
	r.Reset()
	if n := len(r.Events()); n != 0 {
		t.Fatalf("after Reset: %d events", n)
	}
}

func TestFileAndAppendFileShareOneFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	r, err := New(Options{File: path})
	if err != nil {
		t.Fatal(err)
	}
	r.Record(Event{Interface: CRI, Caller: "kubelet", Callee: "cri-fake", Method: "Version", Code: "OK", DurationNS: 1500})
	if err := AppendFile(path, Event{Interface: CNI, Caller: "cri-fake", Callee: "cni-fake", Method: "ADD", Code: "OK", Attrs: map[string]string{"containerID": "abc"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Method != "Version" || evs[1].Attrs["containerID"] != "abc" {
		t.Fatalf("read back %+v", evs)
	}
	if evs[0].Duration() != 1500 {
		t.Fatalf("duration %v", evs[0].Duration())
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	_, err := Read(strings.NewReader("{\"method\":\"A\"}\nnot json\n"), "x.jsonl")
	if err == nil || !strings.Contains(err.Error(), "x.jsonl:2") {
		t.Fatalf("err = %v, want one naming x.jsonl:2", err)
	}
}

func TestSubscribeSeesNewEvents(t *testing.T) {
	r, _ := New(Options{})
	ch, cancel := r.Subscribe(4)
	r.Record(Event{Method: "A"})
	if ev := <-ch; ev.Method != "A" {
		t.Fatalf("got %q", ev.Method)
	}
	cancel()
	cancel() // idempotent
	r.Record(Event{Method: "B"})
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
}

func TestRedact(t *testing.T) {
	pull := &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "nginx"},
		Auth:  &runtimeapi.AuthConfig{Username: "me", Password: "hunter2", IdentityToken: "tok"},
	}
	out := string(RenderProto(pull))
	if strings.Contains(out, "hunter2") || strings.Contains(out, "tok\"") || !strings.Contains(out, Redacted) || !strings.Contains(out, "\"me\"") {
		t.Fatalf("CRI auth not redacted as expected: %s", out)
	}
	if pull.Auth.Password != "hunter2" {
		t.Fatal("Redact changed the original message")
	}
	create := &csi.CreateVolumeRequest{Name: "v", Secrets: map[string]string{"key": "s3cret"}}
	out = string(RenderProto(create))
	if strings.Contains(out, "s3cret") || !strings.Contains(out, Redacted) {
		t.Fatalf("CSI secrets not redacted: %s", out)
	}
	stage := &csi.NodeStageVolumeRequest{VolumeId: "v", Secrets: map[string]string{"a": "b"}, VolumeContext: map[string]string{"c": "d"}}
	out = string(RenderProto(stage))
	if !strings.Contains(out, `"c":"d"`) || strings.Contains(out, `"a":"b"`) {
		t.Fatalf("only the secrets map should be redacted: %s", out)
	}
	plain := &runtimeapi.VersionRequest{Version: "v1"}
	if Redact(plain) != plain {
		t.Fatal("a message without secrets should not be copied")
	}
}

type versionServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (versionServer) Version(_ context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if req.Version == "bad" {
		return nil, status.Error(codes.InvalidArgument, "bad version")
	}
	return &runtimeapi.VersionResponse{RuntimeName: "x"}, nil
}

func TestUnaryInterceptorRecordsCalls(t *testing.T) {
	rec, _ := New(Options{})
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(rec.UnaryServerInterceptor(Boundary{CRI, "kubelet", "cri-fake"})))
	runtimeapi.RegisterRuntimeServiceServer(srv, versionServer{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///buf", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := runtimeapi.NewRuntimeServiceClient(conn)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Version(context.Background(), &runtimeapi.VersionRequest{Version: "v1"})
		}()
	}
	wg.Wait()
	c.Version(context.Background(), &runtimeapi.VersionRequest{Version: "bad"})
	evs := rec.Events()
	if len(evs) != 21 {
		t.Fatalf("%d events, want 21", len(evs))
	}
	last := evs[20]
	if last.Service != "runtime.v1.RuntimeService" || last.Method != "Version" || last.Code != "InvalidArgument" || last.Error != "bad version" || last.Response != nil {
		t.Fatalf("last event %+v", last)
	}
	var req map[string]any
	if err := json.Unmarshal(evs[0].Request, &req); err != nil || req["version"] != "v1" {
		t.Fatalf("request %s (%v)", evs[0].Request, err)
	}
	if !strings.Contains(string(evs[0].Response), `"runtimeName":"x"`) {
		t.Fatalf("response %s", evs[0].Response)
	}
	if evs[0].Time.After(time.Now()) || evs[0].Caller != "kubelet" {
		t.Fatalf("event %+v", evs[0])
	}
}
