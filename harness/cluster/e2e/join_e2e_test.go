//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestClusterJoin: a second directory standing for a second machine joins the first one's cluster
// through its admin kubeconfig only (`harness cluster join`): its node gets its client certificate
// through the TLS bootstrap (a CSR of the bootstrap token's user, approved by the controller-manager's
// csrapproving controller and signed with the cluster's CA), becomes Ready with a pod CIDR the cluster
// allocated, runs a pod that reaches the API server through the kubernetes Service (its log read from
// the joining side's files: the API server does not reach a kubelet on another machine), and `down` on the
// second directory deletes its Node and its bootstrap token and leaves nothing on the machine.
func TestClusterJoin(t *testing.T) {
	c := upCluster(t, 1)
	c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "serviceaccount", "default")
		return err == nil, out
	})
	dir2, err := os.MkdirTemp("", "plugsim-join-")
	if err != nil {
		t.Fatal(err)
	}
	left := false
	t.Cleanup(func() {
		if !left {
			if t.Failed() {
				c.t.Logf("---- the joining side's kubelet log ----\n%s", tailFile(filepath.Join(dir2, "logs", "m2-node1-kubelet.log"), 40))
			}
			if out, err := c.harness("cluster", "down", "--dir", dir2); err != nil {
				t.Errorf("harness cluster down --dir %s: %v\n%s", dir2, err, out)
			}
		}
		if l := leftovers(dir2); len(l) > 0 {
			t.Errorf("down of the joining side left things behind: %s", strings.Join(l, "; "))
		} else {
			os.RemoveAll(dir2)
		}
	})
	start := time.Now()
	out, err := c.harness("cluster", "join", "--kubeconfig", filepath.Join(c.dir, "kubeconfig"), "--name", "m2", "--subnet", "2",
		"--nodes", "1", "--dir", dir2, "--bin-dir", c.bin)
	if err != nil {
		t.Fatalf("harness cluster join: %v\n%s", err, out)
	}
	joined := time.Since(start)
	t.Logf("harness cluster join: %v\n%s", joined.Round(100*time.Millisecond), out)

	var n corev1.Node
	if err := c.getJSON(&n, "node", "m2-node1"); err != nil {
		t.Fatal(err)
	}
	if ok, desc := nodeReady(&n); !ok || n.Spec.PodCIDR == "" {
		t.Fatalf("m2-node1: Ready %v (%s), podCIDR %q", ok, desc, n.Spec.PodCIDR)
	}
	// Its client certificate came through a CSR the controller-manager approved and signed.
	var csrs certificatesv1.CertificateSigningRequestList
	if err := c.getJSON(&csrs, "csr"); err != nil {
		t.Fatal(err)
	}
	bootstrapped := false
	for _, csr := range csrs.Items {
		approved := false
		for _, cd := range csr.Status.Conditions {
			approved = approved || (cd.Type == certificatesv1.CertificateApproved && strings.Contains(cd.Message, "kubelet client certificate"))
		}
		if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") &&
			approved && len(csr.Status.Certificate) > 0 {
			bootstrapped = true
		}
	}
	if !bootstrapped {
		b, _ := json.MarshalIndent(csrs.Items, "", "  ")
		t.Fatalf("no kubelet client CSR of a bootstrap token approved and issued:\n%s", b)
	}

	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: on-m2, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: m2-node1}
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "wget -T 10 -qO- http://198.18.128.1:443/; sleep 3600"]
`)
	p := c.waitPod("on-m2", 120*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(n.Spec.PodCIDR, "0/24")) {
		t.Errorf("pod IP %s is not from m2-node1's podCIDR %s", p.Status.PodIP, n.Spec.PodCIDR)
	}
	t.Logf("a joined machine's node Ready %v after `join` began; its pod Running and Ready %v after that",
		joined.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	// Its log is read from the file the kubelet of the joining side writes: the API server cannot
	// reach a kubelet on another machine (harness/README.md).
	logs, _ := filepath.Glob(filepath.Join(dir2, "nodes", "m2-node1", "logs", "default_on-m2_*", "app", "0.log"))
	c.waitFor("the pod's log line", 60*time.Second, func() (bool, string) {
		if len(logs) == 0 {
			logs, _ = filepath.Glob(filepath.Join(dir2, "nodes", "m2-node1", "logs", "default_on-m2_*", "app", "0.log"))
			return false, "no log file yet"
		}
		b, _ := os.ReadFile(logs[0])
		// The API server's TLS port answers busybox's plain HTTP with a 400: the TCP connection to
		// the kubernetes Service's address was made, through this machine's relay.
		return strings.Contains(string(b), "400 Bad Request"), string(b)
	})
	c.mustKubectl("delete", "pod", "on-m2", "--wait=true")

	out, err = c.harness("cluster", "down", "--dir", dir2)
	if err != nil {
		t.Fatalf("harness cluster down --dir %s: %v\n%s", dir2, err, out)
	}
	left = true
	if got, err := c.kubectl("get", "node", "m2-node1"); err == nil || !strings.Contains(got, "NotFound") {
		t.Errorf("m2-node1 is still in the cluster after down: %s", got)
	}
	if got, _ := c.kubectl("get", "secrets", "-n", "kube-system", "-o", "name"); strings.Contains(got, "bootstrap-token-") {
		t.Errorf("a bootstrap token is left: %s", got)
	}
	if ok, desc := c.readyNodes(); ok != 1 {
		t.Errorf("the first machine's node after the second left: %d Ready: %s", ok, desc)
	}
}
