//go:build e2e

// Package e2e checks `harness cluster up` from the outside, the way a user sees it: bin/kubectl against
// the cluster, and, after `harness cluster down`, nothing left on the machine. The helpers (upCluster,
// kubectl, waitFor, getJSON, nodeExec) are for the checks still to come (issue 14's list).
package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/harness/cluster"
	"github.com/plugsim/plugsim/internal/localuser"
	"github.com/plugsim/plugsim/internal/polltest"
	"github.com/plugsim/plugsim/internal/testbin"
)

// testCluster is a cluster one test started; its cleanup runs `down` and fails the test if anything
// is left behind.
type testCluster struct {
	t     testing.TB
	dir   string
	bin   string
	nodes int
	// upTook is how long `harness cluster up` took, to every node Ready (or registered, with --empty-cni).
	upTook time.Duration
}

// newTestCluster skips when not root, and returns a cluster of nodes nodes not started yet, in a new
// directory; the binaries are bin/'s.
func newTestCluster(t testing.TB, nodes int) *testCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the cluster suite needs root: network namespaces, a bridge and veths, the kubelets' mounts, iptables")
	}
	bin := testbin.Dir(t, "harness", "etcd", "kube", "kube-proxy", "kubectl", "kubelet", "cri-fake", "csi-fake", "cni-fake", "portmap")
	// Not t.TempDir: unix socket paths must stay short, and the directory is removed only after `down`.
	dir, err := os.MkdirTemp("", "plugsim-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	return &testCluster{t: t, dir: dir, bin: bin, nodes: nodes}
}

// upCluster runs `harness cluster up --nodes N` in a fresh directory, with extra flags appended.
func upCluster(t testing.TB, nodes int, extra ...string) *testCluster {
	t.Helper()
	c := newTestCluster(t, nodes)
	dir, bin := c.dir, c.bin
	t.Cleanup(func() {
		if t.Failed() {
			c.keepLogs()
		}
		out, err := c.harness("cluster", "down", "--dir", dir)
		if err != nil {
			t.Errorf("harness cluster down: %v\n%s", err, out)
		}
		if left := leftovers(dir); len(left) > 0 {
			t.Errorf("harness cluster down left things behind: %s", strings.Join(left, "; "))
		} else {
			os.RemoveAll(dir)
		}
	})
	start := time.Now()
	args := append([]string{"cluster", "up", "--nodes", strconv.Itoa(nodes), "--dir", dir, "--bin-dir", bin}, extra...)
	out, err := c.harness(args...)
	c.upTook = time.Since(start)
	if err != nil {
		t.Fatalf("harness %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("harness cluster up --nodes %d: %v\n%s", nodes, c.upTook.Round(100*time.Millisecond), out)
	return c
}

func (c *testCluster) harness(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(c.bin, "harness"), args...).CombinedOutput()
	return string(out), err
}

// kubectl runs bin/kubectl against the cluster from the host's namespace (through the relay), as a user would.
func (c *testCluster) kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(c.dir, "kubeconfig")}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustKubectl is kubectl failing the test on error.
func (c *testCluster) mustKubectl(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// apply is kubectl apply of a manifest given as text.
func (c *testCluster) apply(manifest string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "kubectl"), "--kubeconfig", filepath.Join(c.dir, "kubeconfig"), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
	return string(out)
}

// getJSON decodes `kubectl get ARGS -o json` into v.
func (c *testCluster) getJSON(v any, args ...string) error {
	out, err := c.kubectl(append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return fmt.Errorf("kubectl get %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return json.Unmarshal([]byte(out), v)
}

// waitFor polls cond every 500 ms until it holds, failing the test with the last description
// after timeout.
func (c *testCluster) waitFor(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	c.t.Helper()
	return polltest.Until(c.t, what, timeout, 500*time.Millisecond, cond)
}

// waitPod waits until pod (in the default namespace) satisfies cond.
func (c *testCluster) waitPod(name string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	c.t.Helper()
	var p corev1.Pod
	c.waitFor("pod "+name, timeout, func() (bool, string) {
		if err := c.getJSON(&p, "pod", name); err != nil {
			return false, err.Error()
		}
		return cond(&p), describePod(&p)
	})
	return &p
}

// nodeExec runs a command in a node's network namespace only (its kubelet's view of the network).
func (c *testCluster) nodeExec(node string, args ...string) (string, error) {
	st := c.state()
	for _, n := range st.Nodes {
		if n.Name == node {
			out, err := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + n.Netns, "--"}, args...)...).CombinedOutput()
			return string(out), err
		}
	}
	return "", fmt.Errorf("no node %s in the cluster", node)
}

func (c *testCluster) state() *cluster.State {
	c.t.Helper()
	st, err := cluster.ReadState(c.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// rss is the resident memory of the cluster's processes whose name starts with prefix, in KiB.
func (c *testCluster) rss(prefix string) (kib int, names []string) {
	for _, p := range c.state().Procs {
		if !strings.HasPrefix(p.Name, prefix) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				v, _ := strconv.Atoi(f[1])
				kib += v
				names = append(names, fmt.Sprintf("%s %d MiB", p.Name, v/1024))
			}
		}
	}
	return kib, names
}

// keepLogs copies the logs of a failed run out of the directory the clean-up removes.
func (c *testCluster) keepLogs() {
	dst, err := os.MkdirTemp("", "plugsim-cluster-e2e-logs-")
	if err != nil {
		return
	}
	exec.Command("cp", "-r", filepath.Join(c.dir, "logs"), dst).Run()
	for _, n := range c.state().Nodes {
		os.MkdirAll(filepath.Join(dst, n.Name), 0o755)
		for _, f := range []string{"cri.jsonl", "csi.jsonl", "cni.jsonl", "kubelet.yaml"} {
			exec.Command("cp", filepath.Join(c.dir, "nodes", n.Name, f), filepath.Join(dst, n.Name)).Run()
		}
	}
	for _, f := range []string{"logs/kube-apiserver.log", "logs/node1-kubelet.log"} {
		c.t.Logf("---- last lines of %s ----\n%s", f, tailFile(filepath.Join(c.dir, f), 40))
	}
	c.t.Logf("logs of the failed run kept in %s", dst)
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// leftovers lists what a stopped cluster left on the machine: network namespaces named for its directory,
// mounts under it, processes it started that still run.
func leftovers(dir string) []string {
	var out []string
	st, err := cluster.ReadState(dir)
	if err == nil {
		out = append(out, "the state file "+cluster.StateFile+" (down did not finish)")
		for _, p := range st.Procs {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.PID)); err == nil {
				out = append(out, fmt.Sprintf("maybe process %s (pid %d)", p.Name, p.PID))
			}
		}
	}
	entries, _ := os.ReadDir("/var/run/netns")
	prefix := cluster.PrefixFor(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, "network namespace "+e.Name())
		}
	}
	for _, cg := range cluster.ClusterCgroups(dir) {
		out = append(out, "cgroup "+cg)
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, "mount "+f[4])
		}
	}
	// What runc made for program containers: its containers' state, their bundles and cgroups.
	for _, pattern := range []string{"nodes/*/cri/oci/runc/*", "nodes/*/cri/oci/bundles/*"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range m {
			out = append(out, "runc leftover "+p)
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*/" + prefix + "-*", "/sys/fs/cgroup/*/*/*/" + prefix + "-*"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			out = append(out, "cgroup "+p)
		}
	}
	ps, _ := exec.Command("pgrep", "-af", dir).Output()
	for _, l := range strings.Split(strings.TrimSpace(string(ps)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			out = append(out, "process "+l)
		}
	}
	return out
}

func nodeReady(n *corev1.Node) (bool, string) {
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			return cd.Status == corev1.ConditionTrue, string(cd.Status) + " " + cd.Reason + ": " + cd.Message
		}
	}
	return false, "no Ready condition"
}

func podReady(p *corev1.Pod) bool {
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodReady {
			return cd.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s node=%s ip=%s ready=%v", p.Status.Phase, p.Spec.NodeName, p.Status.PodIP, podReady(p))
	for _, cd := range p.Status.Conditions {
		if cd.Status != corev1.ConditionTrue && cd.Message != "" {
			fmt.Fprintf(&b, " [%s: %s]", cd.Type, cd.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			fmt.Fprintf(&b, " [%s waiting %s: %s]", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	return b.String()
}

// TestClusterOneNode: up with one node, the node Ready in kubectl, a pod from the API server runs on it
// (scheduled, its service-account token volume mounted, its IP from the node's podCIDR, its log read
// through the API server and the kubelet), and down leaves nothing.
func TestClusterOneNode(t *testing.T) {
	c := upCluster(t, 1)

	t.Run("nodes-ready", func(t *testing.T) {
		c.t = t
		out := c.mustKubectl("get", "nodes", "-o", "wide")
		t.Logf("kubectl get nodes -o wide:\n%s", out)
		var n corev1.Node
		if err := c.getJSON(&n, "node", "node1"); err != nil {
			t.Fatal(err)
		}
		if ok, desc := nodeReady(&n); !ok {
			t.Fatalf("node1 is not Ready: %s", desc)
		}
		if n.Spec.PodCIDR == "" {
			t.Error("node1 has no podCIDR: the controller-manager did not allocate one")
		}
		if v := n.Status.NodeInfo.KubeletVersion; v != "v1.37.2" {
			t.Errorf("kubelet version %q", v)
		}
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "cri-fake") {
			t.Logf("container runtime version: %q", n.Status.NodeInfo.ContainerRuntimeVersion)
		}
		kib, names := c.rss("node1-")
		t.Logf("memory of node1 (kubelet and cri-fake; the CSI node plugins are pods, their programs under runc), RSS: %d MiB (%s)", kib/1024, strings.Join(names, ", "))
	})

	t.Run("pod-runs", func(t *testing.T) {
		c.t = t
		// kube-root-ca.crt and the default service account come from the controller-manager; a pod
		// created before them is refused, so wait for them as a user's first pod would.
		c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("get", "serviceaccount", "default")
			return err == nil, out
		})
		c.apply(`apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  containers:
  - {name: app, image: busybox:1.36, command: ["sh", "-c", "echo hello from plugsim; while true; do sleep 10; done"]}
`)
		p := c.waitPod("hello", 120*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
		var n corev1.Node
		if err := c.getJSON(&n, "node", "node1"); err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "node1" {
			t.Errorf("scheduled to %q", p.Spec.NodeName)
		}
		if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(n.Spec.PodCIDR, "0/24")) {
			t.Errorf("pod IP %s is not from node1's podCIDR %s", p.Status.PodIP, n.Spec.PodCIDR)
		}
		token := false
		for _, v := range p.Spec.Volumes {
			token = token || (strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil)
		}
		if !token {
			t.Errorf("the ServiceAccount admission added no kube-api-access volume: %+v", p.Spec.Volumes)
		}
		c.waitFor("kubectl logs hello", 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("logs", "hello")
			return err == nil && strings.Contains(out, "hello from plugsim"), out
		})
		t.Logf("kubectl get pods -o wide:\n%s", c.mustKubectl("get", "pods", "-o", "wide"))
	})

	// Issue 24, 3: a pod's Secret value, taken into its environment, is in the node's CRI trace (what
	// crossed the boundary: CreateContainer's envs), which another local user cannot read: 0600 files in
	// a 0700 directory, under the cluster's 0700 directory.
	t.Run("trace-is-roots-only", func(t *testing.T) {
		c.t = t
		u := localuser.New(t)
		c.apply(`apiVersion: v1
kind: Secret
metadata: {name: db, namespace: default}
stringData: {password: plugsim-secret-value-24}
---
apiVersion: v1
kind: Pod
metadata: {name: with-secret, namespace: default}
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "while true; do sleep 10; done"]
    env:
    - name: DB_PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
`)
		c.waitPod("with-secret", 120*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		// runtime.v1 KeyValue's value is bytes: protojson writes it in base64.
		secret := base64.StdEncoding.EncodeToString([]byte("plugsim-secret-value-24"))
		trace := filepath.Join(c.dir, "nodes", "node1", "cri.jsonl")
		if b, _ := os.ReadFile(trace); !strings.Contains(string(b), secret) {
			t.Errorf("%s lacks the Secret's value (%s): the test no longer shows what the trace holds", trace, secret)
		}
		for path, want := range map[string]os.FileMode{
			c.dir: 0o700, filepath.Join(c.dir, "nodes", "node1"): 0o700, trace: 0o600,
			filepath.Join(c.dir, "nodes", "node1", "csi.jsonl"): 0o600, filepath.Join(c.dir, "nodes", "node1", "cni.jsonl"): 0o600,
			filepath.Join(c.dir, "csi", "controller.jsonl"): 0o600, filepath.Join(c.dir, "logs", "node1-kubelet.log"): 0o600,
		} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %v %v, want mode %v", path, fi.Mode().Perm(), err, want)
			}
		}
		if out, err := u.Command("", "cat", trace).CombinedOutput(); err == nil || strings.Contains(string(out), secret) {
			t.Errorf("%s read %s: %v\n%.300s", u, trace, err, out)
		}
		c.mustKubectl("delete", "pod", "with-secret", "--wait=false")
	})
}

// A second `down` does nothing, and says so; `down` on a directory that never held a cluster too.
func TestDownIsIdempotent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	bin := testbin.Dir(t, "harness")
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		out, err := exec.Command(filepath.Join(bin, "harness"), "cluster", "down", "--dir", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nothing to stop") {
			t.Errorf("down #%d on an empty directory: %v: %s", i+1, err, out)
		}
	}
}

// Issue 14's first check: a node with an empty CNI conf dir is NotReady, its Ready condition saying
// "cni plugin not initialized" (cri-fake's NetworkReady=false, as containerd words it, passed on by the
// kubelet); the conflist dropped in makes it Ready without a restart.
func TestClusterEmptyCNI(t *testing.T) {
	c := upCluster(t, 1, "--empty-cni")
	var n corev1.Node
	c.waitFor("node1 NotReady with cni plugin not initialized", 60*time.Second, func() (bool, string) {
		if err := c.getJSON(&n, "node", "node1"); err != nil {
			return false, err.Error()
		}
		ready, desc := nodeReady(&n)
		return !ready && strings.Contains(desc, "cni plugin not initialized"), desc
	})
	t.Logf("kubectl get nodes:\n%s", c.mustKubectl("get", "nodes"))
	conf, err := os.ReadFile(filepath.Join(c.dir, "nodes", "node1", "cni", "plugsim.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	// Through a rename, as a CNI installer DaemonSet writes it: cri-fake never reads half a file.
	tmp := filepath.Join(c.dir, "nodes", "node1", "cni", "10-plugsim.conflist.tmp")
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "nodes", "node1", "cni", "net.d", "10-plugsim.conflist")); err != nil {
		t.Fatal(err)
	}
	took := c.waitFor("node1 Ready", 120*time.Second, func() (bool, string) {
		if err := c.getJSON(&n, "node", "node1"); err != nil {
			return false, err.Error()
		}
		return nodeReady(&n)
	})
	t.Logf("conflist in → node1 Ready: %v", took.Round(100*time.Millisecond))
}

// `up` killed half-way (SIGKILL: no clean-up of its own runs) leaves processes, namespaces and mounts
// that only the state file records; `down` takes them all away, and a second `down` has nothing to do.
func TestDownAfterUpIsKilled(t *testing.T) {
	c := newTestCluster(t, 2)
	dir, bin := c.dir, c.bin
	up := exec.Command(filepath.Join(bin, "harness"), "cluster", "up", "--nodes", "2", "--dir", dir, "--bin-dir", bin)
	var upOut strings.Builder
	up.Stdout, up.Stderr = &upOut, &upOut
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		up.Process.Kill()
		up.Wait()
		if t.Failed() {
			c.keepLogs()
		}
		c.harness("cluster", "down", "--dir", dir)
		os.RemoveAll(dir)
	})
	// Killed once node2's kubelet is started: the control plane, both nodes' fakes and a kubelet run,
	// and up is still waiting for the pod network and the nodes to be Ready.
	c.waitFor("up to start node2's kubelet", 4*time.Minute, func() (bool, string) {
		st, err := cluster.ReadState(dir)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range st.Procs {
			if p.Name == "node2-kubelet" {
				return true, ""
			}
			names = append(names, p.Name)
		}
		return false, fmt.Sprintf("started: %v; up says:\n%s", names, upOut.String())
	})
	if err := up.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	if left := leftovers(dir); len(left) < 3 {
		t.Fatalf("the killed up left only %v: the test did not kill it half-way", left)
	} else {
		t.Logf("the killed up left %d things running or mounted, among them %s", len(left), strings.Join(left[:3], "; "))
	}
	out, err := c.harness("cluster", "down", "--dir", dir)
	if err != nil {
		t.Fatalf("harness cluster down after a killed up: %v\n%s", err, out)
	}
	if left := leftovers(dir); len(left) > 0 {
		t.Errorf("harness cluster down after a killed up left: %s", strings.Join(left, "; "))
	}
	if out, err := c.harness("cluster", "down", "--dir", dir); err != nil || !strings.Contains(out, "nothing to stop") {
		t.Errorf("a second down: %v: %s", err, out)
	}
}
