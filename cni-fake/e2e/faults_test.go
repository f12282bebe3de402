//go:build e2e

package e2e

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/trace"
)

// noIPs fails the third ADD with the spec's code 11 (try again later), as an exhausted pool does.
var noIPs = map[string]any{"verb": "ADD", "code": 11, "message": "no IP addresses available in range set 10.88.0.1-10.88.255.254", "after": 2, "times": 1}

// faultList is the example conflist cut to cni-fake alone in fake mode (no kernel changes, so
// no namespace is needed), with fault rules.
func faultList(t testing.TB, dir, name string, rules ...any) []byte {
	t.Helper()
	var m map[string]any
	json.Unmarshal(conflist(t, "10-plugsim.conflist", dir, "fake", name), &m)
	fake := m["plugins"].([]any)[0].(map[string]any)
	fake["faults"] = rules
	m["plugins"] = []any{fake}
	b, _ := json.Marshal(m)
	return b
}

// cnitool, one process per call and cni-fake one exec per call: the rule's counts live in
// cni-fake's data dir, so the third `cnitool add` fails, with the rule's code and message.
func TestCnitoolFaults(t *testing.T) {
	bin := binDir(t)
	dir := t.TempDir()
	confDir := filepath.Join(dir, "net.d")
	os.MkdirAll(confDir, 0o755)
	const network = "plugsim-e2e-faults"
	status50 := map[string]any{"verb": "STATUS", "code": 50, "message": "pool drained for maintenance", "times": 1}
	if err := os.WriteFile(filepath.Join(confDir, "10-plugsim.conflist"), faultList(t, dir, network, noIPs, status50), 0o644); err != nil {
		t.Fatal(err)
	}
	cnitool := func(verb, netns string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "cnitool"), verb, network, netns)
		cmd.Env = append(os.Environ(), "CNI_PATH="+bin, "NETCONFPATH="+confDir, "CNI_ARGS=IgnoreUnknown=1;PLUGSIM_CALLER=cnitool")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for i := 1; i <= 4; i++ {
		netns := filepath.Join(dir, fmt.Sprintf("netns-%d", i)) // fake mode: any path
		// cnitool caches results under /var/lib/cni/results by a container ID it derives from
		// the netns path; DEL removes the entry, and so does the cleanup if DEL is not reached.
		sum := sha512.Sum512([]byte(netns))
		t.Cleanup(func() {
			os.Remove(filepath.Join("/var/lib/cni/results", fmt.Sprintf("%s-cnitool-%x-eth0", network, sum[:10])))
		})
		out, err := cnitool("add", netns)
		if i == 3 {
			if err == nil || !strings.Contains(out, "no IP addresses available in range set") {
				t.Fatalf("cnitool add %d: %v: %s", i, err, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cnitool add %d: %v: %s", i, err, out)
		}
		t.Cleanup(func() { cnitool("del", netns) })
	}
	if out, err := cnitool("status", filepath.Join(dir, "netns-1")); err == nil || !strings.Contains(out, "pool drained for maintenance") {
		t.Fatalf("first cnitool status: %v: %s", err, out)
	}
	if out, err := cnitool("status", filepath.Join(dir, "netns-1")); err != nil {
		t.Fatalf("second cnitool status: %v: %s", err, out)
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Method+":"+ev.Code+":"+ev.Attrs["fault"])
	}
	if want := "ADD:OK: ADD:OK: ADD:11:rule-1 ADD:OK: STATUS:50:rule-2 STATUS:OK:"; strings.Join(got, " ") != want {
		t.Fatalf("trace %q, want %q", strings.Join(got, " "), want)
	}
}

// cri-fake execs the chain with a fault rule in the conflist: RunPodSandbox of the third pod fails
// with the CNI error in its message, as containerd reports it, and the others succeed.
func TestCRIFakeSeesCNIFaults(t *testing.T) {
	bin := binDir(t)
	dir := t.TempDir()
	confDir := filepath.Join(dir, "net.d")
	os.MkdirAll(confDir, 0o755)
	if err := os.WriteFile(filepath.Join(confDir, "10-plugsim.conflist"), faultList(t, dir, "plugsim-e2e-crifaults", noIPs), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(server.Options{RootDir: filepath.Join(dir, "root"), CNIConfDir: confDir, CNIBinDirs: []string{bin}, NetNS: "placeholder"})
	if err != nil {
		t.Fatalf("start cri-fake: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 1; i <= 4; i++ {
		_, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("web-%d", i), Namespace: "default", Uid: fmt.Sprintf("uid-%d", i)},
		}})
		if i == 3 {
			if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "no IP addresses available in range set") {
				t.Fatalf("pod 3: %v", err)
			}
		} else if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Attrs["fault"] != "" && (ev.Method != "ADD" || ev.Code != fmt.Sprint(types.ErrTryAgainLater) || ev.Attrs["pod"] != "default/web-3") {
			t.Fatalf("faulted event %+v", ev)
		}
	}
}
