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

// binDir holds the cni-fake binary that TestMain builds from this source: the tests that test the
// binary as such (separate processes racing for the lease lock and the fault counts, libcni's
// exec of the chain, the comparison with the in-process plugin) exec it. A prebuilt binary in
// $PLUGSIM_BIN is not used: a stale one would test old code.
var binDir string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "cni-fake-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(tmp, "cni-fake"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it (see README)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cni-fake: %v\n%s", err, out)
		os.RemoveAll(tmp)
		os.Exit(1)
	}
	binDir = tmp
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
// in go.sum), so a plain `go test` without $PLUGSIM_BIN skips the tests that need one, saying
// why; with $PLUGSIM_BIN set (the Makefile sets it and builds the tools first) a missing tool
// fails the test instead of letting it test less.
func toolPath(t testing.TB, name string) string {
	t.Helper()
	d := os.Getenv("PLUGSIM_BIN")
	switch {
	case d == "":
		t.Skipf("needs the real %s, which `make tools` builds into $PLUGSIM_BIN (unset here): run it through make (make test does)", name)
	case !executable(filepath.Join(d, name)):
		t.Fatalf("%s is not in $PLUGSIM_BIN (%s): run `make tools`", name, d)
	}
	return filepath.Join(d, name)
}

// cniPath is the CNI_PATH for the tests: cni-fake first, then the real tools.
func cniPath() string {
	if d := os.Getenv("PLUGSIM_BIN"); d != "" {
		return binDir + string(os.PathListSeparator) + d
	}
	return binDir
}

// call is one invocation of cni-fake: the CNI_* variables, stdin and working directory a runtime
// would give the binary.
type call struct {
	cmd, containerID, netns, ifName, args string
	env                                   []string // extra KEY=VALUE
	stdin                                 string
	dir                                   string // working directory; "" is the test's
}

// environ is the call's environment, all the binary gets.
func (c call) environ() []string {
	env := []string{"CNI_COMMAND=" + c.cmd, "CNI_PATH=" + cniPath(), "PATH=" + os.Getenv("PATH")}
	for _, kv := range [][2]string{{"CNI_CONTAINERID", c.containerID}, {"CNI_NETNS", c.netns}, {"CNI_IFNAME", c.ifName}, {"CNI_ARGS", c.args}} {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return append(env, c.env...)
}

type outcome struct {
	stdout []byte
	stderr string
	err    *types.Error // nil on success
}

// run makes one call in this process, through main's pluginMain: the process environment is set
// to exactly the call's, the working directory to c.dir, and os.Stdin, os.Stdout and os.Stderr
// are files for the call's stdin and output, all restored afterwards (the way the CNI plugins'
// testutils.CmdAdd drives a plugin's cmdAdd in-process). These are process-wide, so calls through
// run must not overlap: a test of concurrent calls execs the binary with runBinary.
func run(t testing.TB, c call) outcome {
	t.Helper()
	stdin, stdout, stderr := tempFile(t, c.stdin), tempFile(t, ""), tempFile(t, "")
	saved := os.Environ()
	oldIn, oldOut, oldErr := os.Stdin, os.Stdout, os.Stderr
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if os.Stdin != stdin {
			os.Stdin.Close() // the pipe pluginMain hands skel
		}
		os.Stdin, os.Stdout, os.Stderr = oldIn, oldOut, oldErr
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		if err := os.Chdir(wd); err != nil {
			panic(err) // every later test would run in the wrong directory
		}
	}
	env := c.environ() // before Clearenv: it reads $PLUGSIM_BIN and $PATH
	os.Clearenv()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	if c.dir != "" {
		if err := os.Chdir(c.dir); err != nil {
			restore()
			t.Fatal(err)
		}
	}
	os.Stdin, os.Stdout, os.Stderr = stdin, stdout, stderr
	code := func() int {
		defer restore()
		return pluginMain()
	}()
	return outcomeOf(t, c, code, readAll(t, stdout), string(readAll(t, stderr)))
}

// tempFile is a file holding content, read from its start.
func tempFile(t testing.TB, content string) *os.File {
	t.Helper()
	f, err := os.CreateTemp("", "cni-fake-stdio-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func readAll(t testing.TB, f *os.File) []byte {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runBinary execs the cni-fake binary TestMain built, as a runtime does.
func runBinary(t testing.TB, c call) outcome {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cni-fake"))
	cmd.Env = c.environ()
	cmd.Stdin = strings.NewReader(c.stdin)
	cmd.Dir = c.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("exec cni-fake: %v", err)
	}
	return outcomeOf(t, c, code, out.Bytes(), errb.String())
}

// outcomeOf reads a call's result: on a non-zero exit status, stdout must be CNI error JSON with
// a code.
func outcomeOf(t testing.TB, c call, code int, stdout []byte, stderr string) outcome {
	t.Helper()
	o := outcome{stdout: stdout, stderr: stderr}
	if code != 0 {
		o.err = &types.Error{}
		if jerr := json.Unmarshal(stdout, o.err); jerr != nil {
			t.Fatalf("%s failed with exit status %d and stdout %q, which is not CNI error JSON (stderr %q)", c.cmd, code, stdout, stderr)
		}
		if o.err.Code == 0 {
			t.Fatalf("%s failed with an error JSON without code: %s", c.cmd, stdout)
		}
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
