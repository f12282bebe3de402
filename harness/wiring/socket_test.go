package wiring

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/internal/endpoint"
)

// longDir makes a directory whose path is n bytes long, removed with the test.
func longDir(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", n-len(dir)-1))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	return long
}

// checkNode calls each fake through its endpoint and checks the layout: the sockets are reachable
// as DIR/run/..., whether DIR/run is the run directory or a link to a short one.
func checkNode(t *testing.T, n *Node, wantLink bool) {
	t.Helper()
	ctx := context.Background()
	for _, ep := range []string{n.CRIEndpoint, n.CSIEndpoint, n.CSIControllerEndpoint, n.CRIAdmin, n.CSIAdmin} {
		if p := strings.TrimPrefix(ep, "unix://"); len(p) > endpoint.MaxPathLen {
			t.Errorf("endpoint %s is %d bytes", ep, len(p))
		}
	}
	if _, err := n.RuntimeClient.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("CRI: %v", err)
	}
	if _, err := n.IdentityClient.Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Errorf("CSI node plugin: %v", err)
	}
	if _, err := n.ControllerClient.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{}); err != nil {
		t.Errorf("CSI controller plugin: %v", err)
	}
	for _, ep := range []string{n.CRIAdmin, n.CSIAdmin} {
		c, err := admin.NewClient(ep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Trace(0); err != nil {
			t.Errorf("admin %s: %v", ep, err)
		}
	}
	run := filepath.Join(n.Dir, "run")
	fi, err := os.Lstat(run)
	if err != nil {
		t.Fatal(err)
	}
	if isLink := fi.Mode()&os.ModeSymlink != 0; isLink != wantLink {
		t.Errorf("%s is a link: %v, want %v", run, isLink, wantLink)
	}
	if !wantLink && n.RunDir != run {
		t.Errorf("RunDir %s, want %s", n.RunDir, run)
	}
	for _, s := range []string{"cri.sock", "csi/csi.sock", "csi/controller.sock", "cri-admin.sock", "csi-admin.sock"} {
		if fi, err := os.Stat(filepath.Join(run, s)); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("DIR/run/%s: %v %v", s, fi, err)
		}
	}
}

// Sockets stay within the 107 bytes of a unix socket path whatever $TMPDIR or the test's name:
// with a long DIR they live in a short directory that DIR/run links to, removed by Close.
func TestSocketPathsFitWhateverTheDirectory(t *testing.T) {
	long := longDir(t, 100)
	t.Run("TMPDIR of 100 bytes and a long test name of the kind table-driven tests give", func(t *testing.T) {
		t.Setenv("TMPDIR", long)
		n := Start(t, Options{CNI: "off", Admin: true})
		if !strings.HasPrefix(n.Dir, long) {
			t.Fatalf("node dir %s is not under TMPDIR", n.Dir)
		}
		checkNode(t, n, true)
		if !strings.HasPrefix(n.RunDir, "/tmp/plugsim-run-") {
			t.Errorf("RunDir %s: want a short directory in /tmp, $TMPDIR being too long", n.RunDir)
		}
		n.Close()
		for _, p := range []string{n.RunDir, filepath.Join(n.Dir, "run")} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s left behind after Close: %v", p, err)
			}
		}
	})
	t.Run("a given Dir of 100 bytes", func(t *testing.T) {
		n, err := StartNode(Options{Dir: longDir(t, 100), CNI: "off", Admin: true})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		checkNode(t, n, true)
	})
	t.Run("a short Dir keeps the sockets in DIR/run", func(t *testing.T) {
		n, err := StartNode(Options{Dir: t.TempDir(), CNI: "off", Admin: true})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		checkNode(t, n, false)
	})
	t.Run("a long Dir whose run directory is not ours to replace", func(t *testing.T) {
		dir := longDir(t, 100)
		if err := os.MkdirAll(filepath.Join(dir, "run", "mine"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := StartNode(Options{Dir: dir, CNI: "off"})
		if err == nil || !strings.Contains(err.Error(), "the limit is 107 bytes") {
			t.Fatalf("err = %v, want one naming the limit", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "run", "mine")); err != nil {
			t.Errorf("the user's directory was touched: %v", err)
		}
	})
}
