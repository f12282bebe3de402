//go:build e2e

// Package e2e runs the real CRI clients against the cri-fake binary: critest v1.37.0 on the spec
// groups an in-memory runtime can honestly pass, and crictl through every command a person uses.
// Run it with `make e2e-cri`; it needs $PLUGSIM_BIN with cri-fake, cni-fake, critest and crictl
// (`make build tools`), and fails when one is missing.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/testbin"
)

// tool returns $PLUGSIM_BIN/name, failing the test when it is missing.
func tool(t *testing.T, name string) string { t.Helper(); return testbin.Path(t, name) }

// fake is a running cri-fake process.
type fake struct {
	endpoint string
	dir      string
	confDir  string
	log      *bytes.Buffer
	pid      int
	// exited is closed when the cri-fake process ends (a crash, if before the test's cleanup).
	exited chan struct{}
}

// startFake runs bin/cri-fake on a socket in a temporary directory; extra flags are appended.
func startFake(t *testing.T, flags ...string) *fake {
	t.Helper()
	return startFakeWrapped(t, nil, flags...)
}

// startFakeWrapped runs cri-fake under a wrapper command (unshare ...) when wrap is set.
func startFakeWrapped(t *testing.T, wrap []string, flags ...string) *fake {
	t.Helper()
	dir := t.TempDir()
	f := &fake{dir: dir, endpoint: "unix://" + filepath.Join(dir, "cri.sock"), confDir: filepath.Join(dir, "net.d"), log: &bytes.Buffer{}}
	os.MkdirAll(f.confDir, 0o755)
	args := append([]string{
		"--endpoint", f.endpoint,
		"--root-dir", filepath.Join(dir, "root"),
		"--cni-conf-dir", f.confDir,
		"--cni-bin-dir", os.Getenv("PLUGSIM_BIN"),
		"--trace", filepath.Join(dir, "trace.jsonl"),
	}, flags...)
	argv := append(append(wrap[:len(wrap):len(wrap)], tool(t, "cri-fake")), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f.log, f.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.pid = cmd.Process.Pid
	f.exited = make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("cri-fake log:\n%s", f.log)
		}
		// With --netns=real, a pod a client left behind keeps its namespace bind-mounted under
		// the root dir, which would keep the test's temp dir from being removed.
		if ents, err := os.ReadDir(filepath.Join(dir, "root", "netns")); err == nil {
			for _, e := range ents {
				p := filepath.Join(dir, "root", "netns", e.Name())
				if err := syscall.Unmount(p, syscall.MNT_DETACH); err == nil {
					t.Logf("unmounted the network namespace of a pod left running: %s", p)
				}
			}
		}
	})
	sock := strings.TrimPrefix(f.endpoint, "unix://")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("cri-fake did not listen on %s within 10s:\n%s", sock, f.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// useCNIFake drops a conflist that runs cni-fake in fake mode (no kernel state: it accepts the
// placeholder netns paths cri-fake creates). portmap is left out on purpose: it would touch the
// host's iptables.
func (f *fake) useCNIFake(t *testing.T) {
	t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"plugsim","plugins":[{"type":"cni-fake","mode":"fake","dataDir":%q,"logFile":%q,
"capabilities":{"dns":true},"ipam":{"type":"cni-fake","ranges":[[{"subnet":"10.88.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}]}}]}`,
		filepath.Join(f.dir, "cni-data"), filepath.Join(f.dir, "cni.jsonl"))
	if err := os.WriteFile(filepath.Join(f.confDir, "10-plugsim.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The groups of issue 3 (what the runtime's bookkeeping alone passes) plus the two execSync specs
// of the same group, which the process simulation (issue 7) brings. The metrics specs are in
// the focus so that their honest skip (ListMetricDescriptors answers Unimplemented) is visible.
const critestFocus = `Runtime info|PodSandbox runtime should support (basic|metrics)|` +
	`Container runtime should support basic operations on container runtime should support (creating|preserving|starting|stopping|removing|listing|execSync)|` +
	`Idempotence|Image Manager|Image Consistency|Image Identifier`

func TestCritest(t *testing.T) {
	critest := tool(t, "critest")
	tool(t, "cni-fake")
	f := startFake(t)
	f.useCNIFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, critest,
		"--runtime-endpoint", f.endpoint, "--image-endpoint", f.endpoint,
		"-ginkgo.focus", critestFocus, "-ginkgo.no-color", "-ginkgo.v")
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	os.WriteFile(filepath.Join(f.dir, "critest.out"), out, 0o644)
	m := regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("critest printed no summary (err %v):\n%s", err, out)
	}
	passed, _ := strconv.Atoi(string(m[1]))
	failed, _ := strconv.Atoi(string(m[2]))
	skipped, _ := strconv.Atoi(string(m[4]))
	t.Logf("critest v1.37.0: %d passed, %d failed, %d skipped (of the whole suite) in %v", passed, failed, skipped, wall.Round(time.Millisecond))
	if failed != 0 || err != nil {
		t.Errorf("critest failed (%v):\n%s", err, out)
	}
	if passed < 42 {
		t.Errorf("critest passed %d specs, want at least 42", passed)
	}
	// The specs cri-fake truthfully cannot do must have skipped, not passed by accident.
	for _, spec := range []string{"returning metrics descriptors", "listing pod sandbox metrics"} {
		if !regexp.MustCompile(`S \[SKIPPED\][^\n]*\n[^\n]*` + regexp.QuoteMeta(spec)).Match(out) {
			t.Errorf("metrics spec %q did not skip", spec)
		}
	}
}

// crictl runs crictl against the fake and returns its stdout.
func (f *fake) crictl(t *testing.T, args ...string) string {
	t.Helper()
	all := append([]string{"--runtime-endpoint", f.endpoint, "--image-endpoint", f.endpoint, "--timeout", "30s"}, args...)
	cmd := exec.Command(tool(t, "crictl"), all...)
	cmd.Dir = f.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("crictl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func mustContain(t *testing.T, what, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Fatalf("%s: output lacks %q:\n%s", what, s, out)
		}
	}
}

func TestCrictl(t *testing.T) {
	tool(t, "cni-fake")
	f := startFake(t)

	mustContain(t, "version", f.crictl(t, "version"), "RuntimeName:  cri-fake", "Version:  0.1.0", "RuntimeApiVersion:  v1")

	// An empty conf dir: the node is not ready for pods, as with containerd.
	info := f.crictl(t, "info")
	mustContain(t, "info (empty conf dir)", info, `"type": "NetworkReady"`, `"reason": "NetworkPluginNotReady"`, "cni plugin not initialized", f.confDir)
	if !regexp.MustCompile(`"status": false,\s*"type": "NetworkReady"`).MatchString(info) {
		t.Fatalf("NetworkReady is not false:\n%s", info)
	}
	// A conflist dropped in turns the network ready without a restart.
	f.useCNIFake(t)
	info = f.crictl(t, "info")
	if !regexp.MustCompile(`"status": true,\s*"type": "NetworkReady"`).MatchString(info) {
		t.Fatalf("NetworkReady did not turn true after the conflist appeared:\n%s", info)
	}
	mustContain(t, "info (conflist)", info, `"Name": "plugsim"`, `\"type\":\"cni-fake\"`)

	mustContain(t, "pull", f.crictl(t, "pull", "busybox"), "Image is up to date for sha256:")
	mustContain(t, "images", f.crictl(t, "images"), "docker.io/library/busybox", "latest")

	pod := filepath.Join(f.dir, "pod.json")
	os.WriteFile(pod, []byte(`{"metadata":{"name":"web","namespace":"default","uid":"web-uid-1","attempt":0},
"log_directory":"`+filepath.Join(f.dir, "logs")+`","labels":{"app":"web"},"linux":{}}`), 0o644)
	ctr := filepath.Join(f.dir, "ctr.json")
	os.WriteFile(ctr, []byte(`{"metadata":{"name":"box"},"image":{"image":"busybox"},"command":["top"],"log_path":"box/0.log",
"labels":{"io.kubernetes.pod.name":"web","io.kubernetes.pod.namespace":"default"},"linux":{}}`), 0o644)

	podID := strings.TrimSpace(f.crictl(t, "runp", pod))
	mustContain(t, "pods", f.crictl(t, "pods"), podID[:13], "Ready", "web", "default")
	inspectp := f.crictl(t, "inspectp", podID)
	mustContain(t, "inspectp", inspectp, `"state": "SANDBOX_READY"`, `"ip": "10.88.`, `"cniResult"`)

	ctrID := strings.TrimSpace(f.crictl(t, "create", podID, ctr, pod))
	f.crictl(t, "start", ctrID)
	mustContain(t, "ps", f.crictl(t, "ps"), ctrID[:13], "Running", "box", "web")
	inspect := f.crictl(t, "inspect", ctrID)
	mustContain(t, "inspect", inspect, `"state": "CONTAINER_RUNNING"`, filepath.Join(f.dir, "logs", "box", "0.log"), `"imageId": "sha256:`)
	mustContain(t, "stats", f.crictl(t, "stats", "-o", "json"), ctrID, `"workingSetBytes"`)
	mustContain(t, "statsp", f.crictl(t, "statsp", "-o", "json"), podID, `"workingSetBytes"`)
	mustContain(t, "imagefsinfo", f.crictl(t, "imagefsinfo"), `"usedBytes"`, `"mountpoint"`)

	f.crictl(t, "stop", ctrID)
	mustContain(t, "ps -a", f.crictl(t, "ps", "-a"), "Exited")
	f.crictl(t, "rm", ctrID)
	f.crictl(t, "stopp", podID)
	mustContain(t, "pods after stopp", f.crictl(t, "pods"), "NotReady")
	f.crictl(t, "rmp", podID)
	if out := f.crictl(t, "pods", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("pods left after rmp: %s", out)
	}
	f.crictl(t, "rmi", "busybox")
	if out := f.crictl(t, "images", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("images left after rmi: %s", out)
	}
	// The trace holds the CRI calls and the CNI ADD/DEL cri-fake made.
	trace, _ := os.ReadFile(filepath.Join(f.dir, "trace.jsonl"))
	mustContain(t, "trace", string(trace), `"method":"RunPodSandbox"`, `"interface":"CNI","caller":"cri-fake"`, `"method":"ADD"`, `"method":"DEL"`)
}

// TestRealNetNS runs cri-fake with --netns=real and the real bridge and host-local plugins, inside
// a network namespace of its own (unshare -n) that acts as the host: the bridge, the veths and
// the pods' namespaces exist only there, and nothing routes out of the machine.
func TestRealNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--netns=real creates network namespaces: run as root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	tool(t, "bridge")
	tool(t, "host-local")
	dir := t.TempDir()
	f := startFakeWrapped(t, []string{unshare, "--net"}, "--netns", "real")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"e2e-bridge","plugins":[{"type":"bridge","bridge":"plugsim0","isGateway":true,
"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.199.0.0/24"}]]}}]}`, filepath.Join(dir, "ipam"))
	if err := os.WriteFile(filepath.Join(f.confDir, "10-bridge.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(f.dir, "pod.json")
	os.WriteFile(pod, []byte(`{"metadata":{"name":"real","namespace":"default","uid":"real-uid","attempt":0},"linux":{}}`), 0o644)
	podID := strings.TrimSpace(f.crictl(t, "runp", pod))
	inspect := f.crictl(t, "inspectp", podID)
	mustContain(t, "inspectp", inspect, `"ip": "10.199.0.`, `"netNamespace": "`+filepath.Join(f.dir, "root", "netns"))
	m := regexp.MustCompile(`"netNamespace": "([^"]+)"`).FindStringSubmatch(inspect)
	// The pod's namespace is real: eth0 with the address CNI gave it.
	out, err := exec.Command("nsenter", "--net="+m[1], "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.199.0.") {
		t.Fatalf("eth0 in the pod netns: %v\n%s", err, out)
	}
	f.crictl(t, "stopp", podID)
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Fatalf("netns %s still there after stopp: %v", m[1], err)
	}
	f.crictl(t, "rmp", podID)
	// host-local released the address on DEL.
	leases, _ := filepath.Glob(filepath.Join(dir, "ipam", "e2e-bridge", "10.199.0.*"))
	if len(leases) != 0 {
		t.Fatalf("IPAM leases left after DEL: %v", leases)
	}
}
