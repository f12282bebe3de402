//go:build e2e

// Package e2e runs the real csi-sanity v5.6.0 (bin/csi-sanity, built by `make tools`) against the
// real csi-fake binary (bin/csi-fake, built by `make build`): all services on one socket, split
// controller and node processes, two sockets of one process, ephemeral-only, block volumes, and
// (as root) bind mounts in a private mount namespace; and the real CSI sidecars (`make sidecars`)
// named in csi-fake's trace (sidecars_test.go). Run with `make e2e-csi`.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/testbin"
)

// tool returns $PLUGSIM_BIN/name, failing the test when it is missing.
func tool(t testing.TB, name string) string { t.Helper(); return testbin.Path(t, name) }

// mutableParameters is the example file the README documents.
func mutableParameters(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "examples", "csi", "sanity-mutable-parameters.yaml")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("mutable parameters file: %v", err)
	}
	return p
}

// startFake starts bin/csi-fake and waits until every socket answers. The process is stopped
// (SIGTERM, then SIGKILL) in t.Cleanup; its log is printed when the test failed.
func startFake(t testing.TB, wrap []string, args ...string) {
	t.Helper()
	argv := append(append([]string{}, wrap...), tool(t, "csi-fake"))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start csi-fake: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("csi-fake %s log:\n%s", strings.Join(args, " "), log.String())
		}
	})
	var socks []string
	for i, a := range args {
		if (a == "--endpoint" || a == "--controller-endpoint") && i+1 < len(args) {
			socks = append(socks, strings.TrimPrefix(args[i+1], "unix://"))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range socks {
		for {
			c, err := net.Dial("unix", s)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-done:
				t.Fatalf("csi-fake exited before serving %s: %v\n%s", s, err, log.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("csi-fake does not answer on %s: %v\n%s", s, err, log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// summary is Ginkgo's closing line: "Ran 102 of 103 Specs ... 102 Passed | 0 Failed | 1 Pending | 0 Skipped".
type summary struct {
	Ran, Total                       int
	Passed, Failed, Pending, Skipped int
	Wall                             time.Duration
	Failures                         []string
}

var (
	ranRE    = regexp.MustCompile(`Ran (\d+) of (\d+) Specs`)
	countsRE = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)
	ansiRE   = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// runSanity runs csi-sanity with fresh mount and staging directories and parses its summary.
// The full output is kept in the test's temp dir and printed when a spec failed.
func runSanity(t testing.TB, args ...string) summary {
	t.Helper()
	dir := t.TempDir()
	argv := append([]string{
		"--csi.mountdir", filepath.Join(dir, "mount"),
		"--csi.stagingdir", filepath.Join(dir, "staging"),
		"-ginkgo.no-color",
	}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool(t, "csi-sanity"), argv...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	s := summary{Wall: time.Since(start)}
	text := ansiRE.ReplaceAllString(string(out), "")
	m := ranRE.FindStringSubmatch(text)
	c := countsRE.FindStringSubmatch(text)
	if m == nil || c == nil {
		t.Fatalf("csi-sanity %v: no Ginkgo summary (err %v):\n%s", args, err, text)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	s.Ran, s.Total = atoi(m[1]), atoi(m[2])
	s.Passed, s.Failed, s.Pending, s.Skipped = atoi(c[1]), atoi(c[2]), atoi(c[3]), atoi(c[4])
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "[FAIL]") {
			s.Failures = append(s.Failures, l)
		}
	}
	if s.Failed > 0 {
		t.Logf("csi-sanity output:\n%s", text)
	}
	t.Logf("csi-sanity: ran %d of %d specs: %d passed, %d failed, %d pending, %d skipped; wall time %s",
		s.Ran, s.Total, s.Passed, s.Failed, s.Pending, s.Skipped, s.Wall.Round(time.Millisecond))
	return s
}

func (s summary) require(t testing.TB, minPassed int) {
	t.Helper()
	if s.Failed != 0 {
		t.Errorf("csi-sanity: %d specs failed:\n  %s", s.Failed, strings.Join(s.Failures, "\n  "))
	}
	if s.Passed < minPassed {
		t.Errorf("csi-sanity: %d specs passed, want at least %d", s.Passed, minPassed)
	}
}

// fullArgs turns every capability's test on: the attach limit test (with
// --max-volumes-per-node) and the VolumeAttributesClass tests (with the example mutable
// parameters).
func fullArgs(t testing.TB, endpoint string, extra ...string) []string {
	return append([]string{
		"--csi.endpoint", endpoint,
		"--csi.testnodevolumeattachlimit",
		"--csi.testvolumemutableparameters", mutableParameters(t),
	}, extra...)
}

const maxVolumes = "8"

// secretValue is what csi-sanity sends in every secrets field (--csi.secrets); it must never
// appear in csi-fake's trace.
const secretValue = "s3cr3t-do-not-log"

func secretsFile(t testing.TB) string {
	var b strings.Builder
	for _, f := range []string{"CreateVolumeSecret", "DeleteVolumeSecret", "ControllerPublishVolumeSecret",
		"ControllerUnpublishVolumeSecret", "ControllerValidateVolumeCapabilitiesSecret", "NodeStageVolumeSecret",
		"NodePublishVolumeSecret", "CreateSnapshotSecret", "DeleteSnapshotSecret", "ControllerExpandVolumeSecret",
		"ControllerModifyVolumeSecret", "ListSnapshotsSecret", "GetSnapshotSecret"} {
		fmt.Fprintf(&b, "%s:\n  password: %s\n", f, secretValue)
	}
	p := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSanityAllInOne runs every spec against one process with persisted state, a trace file and
// secrets in every request; the trace must hold the calls with the secrets redacted.
func TestSanityAllInOne(t *testing.T) {
	dir := t.TempDir()
	sock, traceFile := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "trace.jsonl")
	startFake(t, nil, "--endpoint", "unix://"+sock, "--node-id", "sanity-node",
		"--max-volumes-per-node", maxVolumes, "--state-dir", filepath.Join(dir, "state"), "--trace", traceFile)
	s := runSanity(t, fullArgs(t, sock, "--csi.secrets", secretsFile(t))...)
	s.require(t, 100)
	tr, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Count(string(tr), "\n")
	if calls < 500 || !strings.Contains(string(tr), `"method":"NodePublishVolume"`) || !strings.Contains(string(tr), "***stripped***") {
		t.Errorf("trace has %d calls, NodePublishVolume %v, redacted secrets %v", calls,
			strings.Contains(string(tr), `"method":"NodePublishVolume"`), strings.Contains(string(tr), "***stripped***"))
	}
	if strings.Contains(string(tr), secretValue) {
		t.Errorf("a secret leaked into the trace %s", traceFile)
	}
	fmt.Printf("csi-sanity all-in-one (state dir, trace, secrets): %d of %d specs passed (%d pending in csi-sanity), %d failed, %d skipped; %d calls traced; wall %s\n",
		s.Passed, s.Total-s.Pending, s.Pending, s.Failed, s.Skipped, calls, s.Wall.Round(time.Millisecond))
}

// TestSanitySplitProcesses runs the controller and the node as two processes with their own
// state, as the controller Deployment and node DaemonSet do; csi-sanity talks to the node socket
// and to the controller socket (--csi.controllerendpoint).
func TestSanitySplitProcesses(t *testing.T) {
	dir := t.TempDir()
	ctrl, node := filepath.Join(dir, "controller.sock"), filepath.Join(dir, "node.sock")
	startFake(t, nil, "--mode", "controller", "--endpoint", "unix://"+ctrl, "--node-id", "sanity-node",
		"--max-volumes-per-node", maxVolumes, "--state-dir", filepath.Join(dir, "controller-state"))
	startFake(t, nil, "--mode", "node", "--endpoint", "unix://"+node, "--node-id", "sanity-node",
		"--max-volumes-per-node", maxVolumes, "--state-dir", filepath.Join(dir, "node-state"))
	s := runSanity(t, fullArgs(t, node, "--csi.controllerendpoint", ctrl)...)
	s.require(t, 100)
	fmt.Printf("csi-sanity split controller/node processes: %d of %d passed, %d failed, %d skipped, wall %s\n", s.Passed, s.Total-s.Pending, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
}

// TestSanitySharedData is the split of TestSanitySplitProcesses as harness cluster up runs it:
// network-attached storage, the node reporting only a zone (--node-topology=false --topology) and
// keeping the volumes' data in the controller's directory (--data-dir).
func TestSanitySharedData(t *testing.T) {
	dir := t.TempDir()
	ctrl, node, data := filepath.Join(dir, "controller.sock"), filepath.Join(dir, "node.sock"), filepath.Join(dir, "controller-state")
	zone := "topology.plugsim.dev/zone=zone-a"
	startFake(t, nil, "--mode", "controller", "--endpoint", "unix://"+ctrl, "--node-id", "sanity-node",
		"--max-volumes-per-node", maxVolumes, "--state-dir", data, "--topology", zone)
	startFake(t, nil, "--mode", "node", "--endpoint", "unix://"+node, "--node-id", "sanity-node",
		"--max-volumes-per-node", maxVolumes, "--state-dir", filepath.Join(dir, "node-state"), "--data-dir", data,
		"--node-topology=false", "--topology", zone)
	s := runSanity(t, fullArgs(t, node, "--csi.controllerendpoint", ctrl)...)
	s.require(t, 100)
	if _, err := os.Stat(filepath.Join(dir, "node-state", "volumes")); !os.IsNotExist(err) {
		t.Errorf("the node kept volume data in its own state dir (%v); --data-dir is the controller's", err)
	}
	fmt.Printf("csi-sanity split processes, shared data, zone topology: %d of %d passed, %d failed, %d skipped, wall %s\n", s.Passed, s.Total-s.Pending, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
}

// TestSanityTwoSockets serves the controller on a second socket of the same process.
func TestSanityTwoSockets(t *testing.T) {
	dir := t.TempDir()
	sock, ctrl := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "controller.sock")
	startFake(t, nil, "--endpoint", "unix://"+sock, "--controller-endpoint", "unix://"+ctrl,
		"--node-id", "sanity-node", "--max-volumes-per-node", maxVolumes)
	s := runSanity(t, fullArgs(t, sock, "--csi.controllerendpoint", ctrl)...)
	s.require(t, 100)
	fmt.Printf("csi-sanity one process, two sockets: %d of %d passed, %d failed, %d skipped, wall %s\n", s.Passed, s.Total-s.Pending, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
}

// ephemeralNotApplicable are the specs that need CreateVolume (ValidateVolumeCapabilities is not
// gated on a capability in csi-sanity, and two node specs create a volume first); an
// ephemeral-only driver has no controller, so they cannot apply. The driver tests (TestEphemeral*) cover the
// target path rules they would have checked.
const ephemeralNotApplicable = `ValidateVolumeCapabilities|should remove target path|does not exist on the specified path`

func TestSanityEphemeralOnly(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	startFake(t, nil, "--ephemeral-only", "--endpoint", "unix://"+sock, "--node-id", "sanity-node")
	s := runSanity(t, "--csi.endpoint", sock, "-ginkgo.skip", ephemeralNotApplicable)
	// Identity (3), node capabilities and info (2), publish/unpublish argument checks (5),
	// stats argument checks and unknown volume (3), NodeGetStorageHealth (1).
	s.require(t, 14)
	fmt.Printf("csi-sanity ephemeral-only: %d passed, %d failed, %d skipped as not applicable or capability-gated, wall %s\n",
		s.Passed, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
}

// TestSanityBindMounts runs the full suite with --mount=bind in a private mount namespace
// (unshare), so every bind mount csi-fake makes dies with it, and then checks that no mount under
// the test's directory is visible in the test's own namespace.
func TestSanityBindMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--mount=bind needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to keep the bind mounts in a private namespace: %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	startFake(t, []string{unshare, "--mount", "--propagation", "private"},
		"--mount", "bind", "--endpoint", "unix://"+sock, "--node-id", "sanity-node", "--max-volumes-per-node", maxVolumes)
	s := runSanity(t, fullArgs(t, sock)...)
	s.require(t, 100)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), dir) {
		t.Errorf("a mount under %s leaked into the test's mount namespace:\n%s", dir, mi)
	}
	fmt.Printf("csi-sanity --mount=bind: %d of %d passed, %d failed, %d skipped, wall %s\n", s.Passed, s.Total-s.Pending, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
}

// TestSanityBlockVolumes runs the full suite with raw block volumes (--csi.testvolumeaccesstype
// block): sparse backing files, file targets, and as root bind mounts of a file onto a file.
func TestSanityBlockVolumes(t *testing.T) {
	for _, mount := range []string{"fake", "bind"} {
		t.Run(mount, func(t *testing.T) {
			var wrap []string
			if mount == "bind" {
				if os.Geteuid() != 0 {
					t.Skip("--mount=bind needs root")
				}
				unshare, err := exec.LookPath("unshare")
				if err != nil {
					t.Fatalf("unshare (util-linux) is needed to keep the bind mounts in a private namespace: %v", err)
				}
				wrap = []string{unshare, "--mount", "--propagation", "private"}
			}
			dir := t.TempDir()
			sock := filepath.Join(dir, "csi.sock")
			startFake(t, wrap, "--mount", mount, "--endpoint", "unix://"+sock, "--node-id", "sanity-node", "--max-volumes-per-node", maxVolumes)
			s := runSanity(t, fullArgs(t, sock, "--csi.testvolumeaccesstype", "block")...)
			s.require(t, 100)
			fmt.Printf("csi-sanity block volumes, --mount=%s: %d of %d passed, %d failed, %d skipped, wall %s\n", mount, s.Passed, s.Total-s.Pending, s.Failed, s.Skipped, s.Wall.Round(time.Millisecond))
		})
	}
}
