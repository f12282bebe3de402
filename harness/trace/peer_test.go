package trace

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// peerChildEnv makes the test binary, re-executed under another name, a client that calls Version
// on the socket in the variable and exits.
const peerChildEnv = "PLUGSIM_TRACE_PEER_CHILD"

func TestMain(m *testing.M) {
	if sock := os.Getenv(peerChildEnv); sock != "" {
		if err := callVersion(context.Background(), sock); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// callVersion dials the way the kubelet's cri-client does: plain grpc-go, no user agent, no
// metadata of its own.
func callVersion(ctx context.Context, sock string) error {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// serveTraced serves Version (trace_test.go's versionServer) on a fresh socket behind PeerListener and the trace interceptor.
func serveTraced(t testing.TB) (*Recorder, string) {
	t.Helper()
	rec, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(rec.UnaryServerInterceptor(Boundary{Interface: CRI, Caller: "boundary-default", Callee: "cri-fake"})))
	runtimeapi.RegisterRuntimeServiceServer(g, versionServer{})
	go g.Serve(PeerListener(l))
	t.Cleanup(g.Stop)
	return rec, sock
}

// A real client process is named from the socket's peer credentials: its executable's name, the
// CSI sidecars by their component's name. The binary is this test's, linked under each name, since
// /proc/<pid>/comm is the basename of the path the process was executed by.
func TestPeerProcessNamesTheCaller(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("peer credentials (SO_PEERCRED) are Linux-only; elsewhere the boundary's caller is kept")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec, sock := serveTraced(t)
	bin := t.TempDir()
	for _, tc := range []struct{ exe, want string }{
		{"kubelet", "kubelet"},
		{"csi-provisioner", "external-provisioner"},
		{"csi-attacher", "external-attacher"},
		{"csi-resizer", "external-resizer"},
		{"csi-snapshotter", "external-snapshotter"},
		{"crictl", "crictl"},
	} {
		t.Run(tc.exe, func(t *testing.T) {
			exe := filepath.Join(bin, tc.exe)
			if err := os.Symlink(self, exe); err != nil {
				t.Fatal(err)
			}
			before := len(rec.Events())
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), peerChildEnv+"="+sock)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tc.exe, err, out)
			}
			// The server records the call before it answers, so it is in the ring by now.
			evs := rec.Events()
			if len(evs) != before+1 || evs[len(evs)-1].Caller != tc.want {
				t.Fatalf("after %s's call: events %+v, want one more with caller %q", tc.exe, evs[before:], tc.want)
			}
		})
	}
}

// In this very process (the harness playing a component) the peer says nothing: the metadata the
// harness sets names the caller, else the boundary does.
func TestPeerInProcessKeepsBoundaryAndMetadata(t *testing.T) {
	rec, sock := serveTraced(t)
	if err := callVersion(context.Background(), sock); err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), CallerMetadata, "external-attacher")
	if err := callVersion(ctx, sock); err != nil {
		t.Fatal(err)
	}
	evs := rec.Events()
	if len(evs) != 2 || evs[0].Caller != "boundary-default" || evs[1].Caller != "external-attacher" {
		t.Fatalf("events %+v; want callers boundary-default, then external-attacher", evs)
	}
}

func TestCallerName(t *testing.T) {
	for in, want := range map[string]string{
		"csi-provisioner":  "external-provisioner",
		"kubelet":          "kubelet",
		"ku\x1bbe let\x00": "kubelet",
		"":                 "",
	} {
		if got := CallerName(in); got != want {
			t.Errorf("CallerName(%q) = %q, want %q", in, got, want)
		}
	}
}
