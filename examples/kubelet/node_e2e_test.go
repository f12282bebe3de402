//go:build e2e

package kubelet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/polltest"
	"github.com/plugsim/plugsim/internal/testbin"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/plugsim/plugsim/harness/trace"
)

// node is a throw-away Kubernetes node: a network namespace of its own (loopback and a veth pair
// interface, no route out of the machine) in which cri-fake, csi-fake and a standalone kubelet run.
type node struct {
	t       testing.TB
	name    string // network namespace name
	nsPath  string
	dir     string
	bin     string
	procs   []*proc
	kubelet *proc
	// webRunning is when the nginx pod was seen Running: the boundary picture ends there.
	webRunning time.Time
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// nodeAddr is the node's own address, on one end of a veth pair whose both ends stay inside the
// node's namespace (this kernel has no dummy links). It comes from TEST-NET-1 (RFC 5737), which
// nothing routes, and the namespace has no link to the host: no packet can leave the machine.
const nodeAddr = "192.0.2.10"

func binDir(t testing.TB) string {
	return testbin.Dir(t, "kubelet", "cri-fake", "cni-fake", "csi-fake", "portmap", "crictl", "harness")
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNode creates the namespace and the directories; nothing runs yet.
func newNode(t *testing.T) *node {
	if os.Geteuid() != 0 {
		t.Skip("the kubelet suite needs root: it creates a network namespace, mounts, veths and iptables rules")
	}
	n := &node{t: t, bin: binDir(t), name: fmt.Sprintf("plugsim-node-%d", os.Getpid())}
	// Not t.TempDir: the kubelet bind-mounts its root dir, which must be unmounted before removal,
	// and the paths must stay short for unix sockets.
	dir, err := os.MkdirTemp("", "plugsim-node-")
	if err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	// Cleanups run last-registered first: this check, registered first, runs after everything
	// else has been torn down.
	t.Cleanup(func() {
		if left := leftovers(n.name, dir); len(left) > 0 {
			t.Errorf("the suite left things behind: %v", left)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			n.dumpLogs(t)
			n.keepArtifacts(t)
		}
		n.stopAll()
		n.unmountAll()
		os.RemoveAll(n.dir)
	})

	run(t, "ip", "netns", "add", n.name)
	n.nsPath = "/var/run/netns/" + n.name
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.name).Run()
	})
	run(t, "ip", "-n", n.name, "link", "set", "lo", "up")
	run(t, "ip", "-n", n.name, "link", "add", "node0", "type", "veth", "peer", "name", "node0-peer")
	run(t, "ip", "-n", n.name, "addr", "add", nodeAddr+"/24", "dev", "node0")
	run(t, "ip", "-n", n.name, "link", "set", "node0", "up")
	run(t, "ip", "-n", n.name, "link", "set", "node0-peer", "up")
	// The kubelet takes its node IP from the default route; this one leads only to the veth pair.
	run(t, "ip", "-n", n.name, "route", "add", "default", "dev", "node0")
	for _, d := range []string{"manifests", "kubelet", "logs", "cni/net.d", "cni/results", "state/cri", "state/csi", "plugins_registry", "plugins"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *node) path(p ...string) string { return filepath.Join(append([]string{n.dir}, p...)...) }

// start runs a command inside the node's network namespace only (nsenter --net): `ip netns exec`
// would also remount /sys and hide the cgroup mounts the kubelet needs.
func (n *node) start(name string, args ...string) *proc {
	n.t.Helper()
	logPath := n.path(name + ".log")
	logf, err := os.Create(logPath)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + n.nsPath, "--"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p
}

// stop sends TERM to the process group, then KILL after a grace period.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (n *node) stopAll() {
	// The kubelet first, so it does not restart what the fakes tear down; then the fakes.
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(10 * time.Second)
	}
}

// unmountAll removes every mount under the node's directory, deepest first: the kubelet's
// self-bind-mounted root dir and anything the CSI driver or the kubelet mounted below it.
func (n *node) unmountAll() {
	for i := 0; i < 5; i++ {
		mounts := n.mounts()
		if len(mounts) == 0 {
			return
		}
		for j := len(mounts) - 1; j >= 0; j-- {
			unix.Unmount(mounts[j], unix.MNT_DETACH)
		}
	}
}

func (n *node) mounts() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == n.dir || strings.HasPrefix(f[4], n.dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func (n *node) dumpLogs(t testing.TB) {
	for _, p := range n.procs {
		b, _ := os.ReadFile(p.log)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("---- last lines of %s ----\n%s", p.name, b)
	}
}

// keepArtifacts copies the logs and traces of a failed run out of the node's directory, which the
// clean-up removes.
func (n *node) keepArtifacts(t testing.TB) {
	dst, err := os.MkdirTemp("", "plugsim-kubelet-e2e-artifacts-")
	if err != nil {
		return
	}
	files, _ := filepath.Glob(n.path("*.log"))
	traces, _ := filepath.Glob(n.path("*.jsonl"))
	for _, f := range append(files, traces...) {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	t.Logf("logs and traces of the failed run kept in %s", dst)
}

// httpClient dials from inside the node's namespace: the socket is created on a thread switched
// into the namespace, and stays there.
func (n *node) httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.WithNetNSPath(n.nsPath, func(ns.NetNS) error {
				var d net.Dialer
				var err error
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

// pods reads the kubelet's own view of its pods from its read-only port.
func (n *node) pods() ([]corev1.Pod, error) {
	resp, err := n.httpClient().Get("http://127.0.0.1:10255/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (n *node) pod(name string) (*corev1.Pod, bool) {
	pods, err := n.pods()
	if err != nil {
		return nil, false
	}
	for i := range pods {
		if pods[i].Name == name || strings.HasPrefix(pods[i].Name, name+"-") {
			return &pods[i], true
		}
	}
	return nil, false
}

// waitFor polls cond every 200 ms until it returns true, failing the test with the last
// description after timeout.
func (n *node) waitFor(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	n.t.Helper()
	return polltest.Until(n.t, what, timeout, 200*time.Millisecond, cond)
}

func (n *node) writeFile(rel string, data []byte) {
	n.t.Helper()
	p := n.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	// Write then rename, so the kubelet's file source never sees half a manifest. The temporary
	// file's name starts with a dot: the file source reads every other file of the directory as a
	// manifest (pkg/kubelet/config: extractFromDir globs "[^.]*", the watch ignores dot files), and a web.yaml.tmp would start
	// the pod once more under another UID, then remove it at the rename, deleting its pod dir.
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		n.t.Fatal(err)
	}
}

// addManifest copies a static pod manifest from examples/kubelet into the kubelet's static pod dir.
func (n *node) addManifest(file string) {
	n.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		n.t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		n.t.Fatalf("%s: %v", file, err)
	}
	n.writeFile(filepath.Join("manifests", filepath.Base(file)), b)
}

func (n *node) removeManifest(file string) {
	if err := os.Remove(n.path("manifests", filepath.Base(file))); err != nil {
		n.t.Fatal(err)
	}
}

// traceEvents reads a fake's trace file.
func (n *node) traceEvents(file string) []trace.Event {
	evs, err := trace.ReadFile(n.path(file))
	if err != nil && !os.IsNotExist(err) {
		n.t.Fatalf("read trace %s: %v", file, err)
	}
	return evs
}

// leftovers lists what the node left on the machine: the namespace, mounts under its directory,
// and processes still running.
func leftovers(name, dir string) []string {
	var out []string
	if _, err := os.Stat("/var/run/netns/" + name); err == nil {
		out = append(out, "network namespace "+name)
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(b, []byte(dir)) {
		out = append(out, "mounts under "+dir)
	}
	ps, _ := exec.Command("pgrep", "-af", dir).Output()
	for _, l := range strings.Split(strings.TrimSpace(string(ps)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			out = append(out, "process: "+l)
		}
	}
	return out
}
