package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/ipam"
)

// binDir holds the cni-fake binary the tests exec: $PLUGSIM_BIN when it has one (the Makefile
// builds it first), else a fresh build in a temporary directory.
var binDir string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "cni-fake-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = os.Getenv("PLUGSIM_BIN")
	if binDir == "" || !executable(filepath.Join(binDir, "cni-fake")) {
		build := exec.Command("go", "build", "-o", filepath.Join(tmp, "cni-fake"), ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it (see README)
		out, err := build.CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building cni-fake: %v\n%s", err, out)
			os.Exit(1)
		}
		binDir = tmp
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// toolPath finds a real CNI tool (portmap, host-local, noop) that `make tools` builds into
// $PLUGSIM_BIN. The plugin module cannot be built from this module (portmap's dependencies are not
// in go.sum), so tests that need one skip without it; the e2e suite fails instead.
func toolPath(t testing.TB, name string) string {
	t.Helper()
	if d := os.Getenv("PLUGSIM_BIN"); d != "" && executable(filepath.Join(d, name)) {
		return filepath.Join(d, name)
	}
	t.Skipf("%s not found in $PLUGSIM_BIN (%q): run `make tools` (make test does)", name, os.Getenv("PLUGSIM_BIN"))
	return ""
}

// cniPath is the CNI_PATH for the tests: cni-fake first, then the real tools.
func cniPath() string {
	if d := os.Getenv("PLUGSIM_BIN"); d != "" && d != binDir {
		return binDir + string(os.PathListSeparator) + d
	}
	return binDir
}

// call is one direct invocation of the binary.
type call struct {
	cmd, containerID, netns, ifName, args string
	env                                   []string // extra KEY=VALUE
	stdin                                 string
	dir                                   string // working directory; "" is the test's
}

type outcome struct {
	stdout []byte
	stderr string
	err    *types.Error // nil on success
}

func run(t testing.TB, c call) outcome {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cni-fake"))
	cmd.Env = []string{"CNI_COMMAND=" + c.cmd, "CNI_PATH=" + cniPath(), "PATH=" + os.Getenv("PATH")}
	for k, v := range map[string]string{"CNI_CONTAINERID": c.containerID, "CNI_NETNS": c.netns, "CNI_IFNAME": c.ifName, "CNI_ARGS": c.args} {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stdin = strings.NewReader(c.stdin)
	cmd.Dir = c.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	o := outcome{stdout: out.Bytes(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.err = &types.Error{}
		if jerr := json.Unmarshal(out.Bytes(), o.err); jerr != nil {
			t.Fatalf("%s failed with %v and stdout %q, which is not CNI error JSON (stderr %q)", c.cmd, err, out.String(), o.stderr)
		}
		if o.err.Code == 0 {
			t.Fatalf("%s failed with an error JSON without code: %s", c.cmd, out.String())
		}
	default:
		t.Fatalf("exec cni-fake: %v", err)
	}
	if strings.Contains(o.stderr, "panic") {
		t.Fatalf("%s panicked: %s", c.cmd, o.stderr)
	}
	return o
}

// testConf is a plugin entry as libcni would send it, with its data and log in dir.
func testConf(dir, version string, extra map[string]any) string {
	m := map[string]any{
		"cniVersion": version,
		"name":       "testnet",
		"type":       "cni-fake",
		"dataDir":    filepath.Join(dir, "data"),
		"logFile":    filepath.Join(dir, "cni.jsonl"),
		"ipam": map[string]any{
			"type":   "cni-fake",
			"ranges": [][]map[string]string{{{"subnet": "10.77.0.0/24"}}},
			"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
		},
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// leaseFiles lists the lease files of testnet.
func leaseFiles(t testing.TB, dir string) []string {
	t.Helper()
	return networkLeases(t, dir, "testnet")
}

// networkLeases lists the leased addresses of a network whose dataDir is dir/data.
func networkLeases(t testing.TB, dir, network string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "data", network)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	s, err := ipam.Open(filepath.Join(dir, "data"), network)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	leases, err := s.Leases()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range leases {
		out = append(out, l.IP.String())
	}
	return out
}
