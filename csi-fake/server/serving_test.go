package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// A request above the 4 MiB a CSI client accepts is answered ResourceExhausted before it is
// read, and csi-fake goes on serving.
func TestOversizedRequestIsResourceExhausted(t *testing.T) {
	s := start(t, Options{})
	conn := dial(t, s.Endpoint())
	ctx := tctx(t)
	huge := &csi.CreateVolumeRequest{Name: "big", VolumeCapabilities: []*csi.VolumeCapability{snw},
		Parameters: map[string]string{"p": strings.Repeat("x", 5<<20)}}
	if _, err := csi.NewControllerClient(conn).CreateVolume(ctx, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("5 MiB request: %v, want ResourceExhausted", err)
	}
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("after the oversized request: %v", err)
	}
}

// The CSI sockets are 0660, the admin socket 0600, the registration socket 0600, unless asked.
func TestSocketModes(t *testing.T) {
	dir, err := endpoint.MkdirTemp("csi-fake-", len("ctrl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	mode := func(ep string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(strings.TrimPrefix(ep, "unix://"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	ep := func(name string) string { return endpoint.URL(filepath.Join(dir, name)) }
	opts := Options{Endpoint: ep("csi.sock"), ControllerEndpoint: ep("ctrl.sock"), AdminSocket: ep("admin.sock"),
		Register: true, PluginRegistryDir: filepath.Join(dir, "reg")}
	s := start(t, opts)
	if m := [4]os.FileMode{mode(opts.Endpoint), mode(opts.ControllerEndpoint), mode(opts.AdminSocket), mode(s.RegistrationEndpoint())}; m != [4]os.FileMode{0o660, 0o660, 0o600, 0o600} {
		t.Errorf("default modes (csi, controller, admin, registration) %v, want [0660 0660 0600 0600]", m)
	}
	s.Close()
	opts.SocketMode, opts.AdminSocketMode = 0o600, 0o640
	s = start(t, opts)
	if m := [4]os.FileMode{mode(opts.Endpoint), mode(opts.ControllerEndpoint), mode(opts.AdminSocket), mode(s.RegistrationEndpoint())}; m != [4]os.FileMode{0o600, 0o600, 0o640, 0o600} {
		t.Errorf("asked modes (csi, controller, admin, registration) %v, want [0600 0600 0640 0600]", m)
	}
}

// FaultSeed seeds the rules, and a faulted call's trace event records it.
func TestFaultSeed(t *testing.T) {
	s := start(t, Options{FaultSeed: 21})
	if s.FaultSeed() != 21 {
		t.Fatalf("FaultSeed() = %d, want 21", s.FaultSeed())
	}
	if _, err := s.Faults().Add(faults.Rule{Method: "Probe", Code: "Unavailable", Probability: 0.999999}); err != nil {
		t.Fatal(err)
	}
	if _, err := csi.NewIdentityClient(dial(t, s.Endpoint())).Probe(tctx(t), &csi.ProbeRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Probe: %v, want the injected Unavailable", err)
	}
	evs := s.Recorder().Events()
	if len(evs) != 1 || evs[0].Attrs[trace.FaultSeedAttr] != "21" {
		t.Fatalf("trace %+v, want the faulted Probe with faultSeed 21", evs)
	}
}
