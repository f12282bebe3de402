//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certsv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// The source note's second half on a plugsim cluster, each step through helm and kubectl as the note
// types it (examples/addons/*.md): metrics-server v0.8.0 installed by Helm from the chart its module
// carries, `kubectl top`, an HPA up and down on cri-fake's simulated CPU, the upgrade without
// --kubelet-insecure-tls that leaves the new pod 0/1 Running with the x509 IP SAN error, the rollback,
// and serverTLSBootstrap with its CSRs approved making the flag unnecessary.
func TestClusterAddons(t *testing.T) {
	c := upCluster(t, 2)
	testbinHas(t, c.bin, "helm", "charts/metrics-server.tgz", "programs/metrics-server")
	c.waitFor("the default service account", 60*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "serviceaccount", "default")
		return err == nil, out
	})
	helmHome := t.TempDir()
	chart := filepath.Join(c.bin, "charts", "metrics-server.tgz")
	const ns = "kube-system"

	// Kustomize, as the note installs the Gateway API's CRDs: `kubectl kustomize` shows what `kubectl apply
	// -k` will make (ten CRDs and the safe-upgrades ValidatingAdmissionPolicy of v1.6.3), then it is made.
	t.Run("kustomize-gateway-api", func(t *testing.T) {
		c.t = t
		dir := filepath.Join(c.bin, "gateway-api", "crd")
		out := c.mustKubectl("kustomize", dir)
		kinds := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^kind: (\w+)$`).FindAllStringSubmatch(out, -1) {
			kinds[m[1]]++
		}
		t.Logf("kubectl kustomize %s: kinds %v", dir, kinds)
		if kinds["CustomResourceDefinition"] != 10 || kinds["ValidatingAdmissionPolicy"] != 1 {
			t.Errorf("kubectl kustomize: %d CustomResourceDefinitions and %d ValidatingAdmissionPolicy, want 10 and 1", kinds["CustomResourceDefinition"], kinds["ValidatingAdmissionPolicy"])
		}
		if !strings.Contains(out, "name: safe-upgrades.gateway.networking.k8s.io") {
			t.Error("kubectl kustomize: no safe-upgrades.gateway.networking.k8s.io")
		}
		t.Logf("kubectl apply -k %s:\n%s", dir, c.mustKubectl("apply", "-k", dir))
		var crds string
		c.waitFor("10 gateway.networking CRDs", 60*time.Second, func() (bool, string) {
			all, err := c.kubectl("get", "crd")
			crds = grepLines(all, "gateway.networking")
			return err == nil && strings.Count(crds, "\n")+1 == 10, all
		})
		t.Logf("kubectl get crd | grep gateway.networking:\n%s", crds)
		c.mustKubectl("get", "validatingadmissionpolicy", "safe-upgrades.gateway.networking.k8s.io")
		c.mustKubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd/gateways.gateway.networking.k8s.io")
	})

	t.Run("helm-install-top", func(t *testing.T) {
		c.t = t
		c.mustHelm(helmHome, "install", "metrics-server", chart, "-n", ns, "--set", "args={--kubelet-insecure-tls}")
		c.waitMetricsServer(t, 1)
		c.waitTopNodes(t)
		out := c.mustHelm(helmHome, "list", "-n", ns)
		t.Logf("helm list -n kube-system:\n%s", out)
		if !regexp.MustCompile(`(?m)^metrics-server\s+kube-system\s+1\s+.*\s+deployed\s+metrics-server-3\.12\.2\s+0\.8\.0\s*$`).MatchString(out) {
			t.Errorf("helm list: no deployed revision 1 of metrics-server-3.12.2, app version 0.8.0:\n%s", out)
		}
		if got := c.mustHelm(helmHome, "get", "values", "metrics-server", "-n", ns); got != "USER-SUPPLIED VALUES:\nargs:\n- --kubelet-insecure-tls\n" {
			t.Errorf("helm get values:\n%q, want the note's USER-SUPPLIED VALUES: args: - --kubelet-insecure-tls", got)
		}
	})

	// cri-fake charges a busy loop's CPU time to its container; the kubelet's /metrics/resource passes
	// it on, metrics-server serves it, and the HPA controller scales on it: up while the loop runs, down
	// once the Deployment's pods only sleep.
	t.Run("hpa-up-and-down", func(t *testing.T) {
		c.t = t
		manifest, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "addons", "cpu-burner.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c.apply(string(manifest))
		c.waitFor("kubectl top pods to show burner's CPU", 240*time.Second, func() (bool, string) {
			out, err := c.kubectl("top", "pods", "-l", "app=burner")
			if err != nil {
				return false, out
			}
			for _, r := range table(out)[1:] {
				if m, _ := strconv.Atoi(strings.TrimSuffix(r[1], "m")); m >= 50 {
					return true, out
				}
			}
			return false, out
		})
		t.Logf("kubectl top pods:\n%s", c.mustKubectl("top", "pods"))
		up := c.waitFor("the HPA to scale burner up", 300*time.Second, func() (bool, string) {
			var d appsv1.Deployment
			if err := c.getJSON(&d, "deployment", "burner"); err != nil {
				return false, err.Error()
			}
			out, _ := c.kubectl("get", "hpa", "burner")
			return d.Status.ReadyReplicas >= 2, out
		})
		t.Logf("scaled up after %v:\n%s", up.Round(time.Second), c.mustKubectl("get", "hpa", "burner"))
		c.mustKubectl("set", "env", "deployment/burner", "LOAD=off")
		down := c.waitFor("the HPA to scale burner back down to 1", 300*time.Second, func() (bool, string) {
			var d appsv1.Deployment
			if err := c.getJSON(&d, "deployment", "burner"); err != nil {
				return false, err.Error()
			}
			out, _ := c.kubectl("get", "hpa", "burner")
			return d.Spec.Replicas != nil && *d.Spec.Replicas == 1 && d.Status.Replicas == 1, out
		})
		t.Logf("scaled down after %v:\n%s", down.Round(time.Second), c.mustKubectl("describe", "hpa", "burner"))
		c.mustKubectl("delete", "-f", filepath.Join(repoRoot(t), "examples", "addons", "cpu-burner.yaml"), "--wait=false")
	})

	// The note's failure: upgraded without the flag (--reset-values: a helm upgrade given no values keeps
	// the release's), the new pod checks each kubelet's self-signed certificate by the node's address.
	t.Run("upgrade-without-insecure-tls", func(t *testing.T) {
		c.t = t
		c.mustHelm(helmHome, "upgrade", "metrics-server", chart, "-n", ns, "--reset-values")
		var bad corev1.Pod
		c.waitFor("the upgraded pod to log the x509 IP SAN error", 180*time.Second, func() (bool, string) {
			for _, p := range c.metricsServerPods(t) {
				if !strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "--kubelet-insecure-tls") {
					bad = p
					log, _ := c.kubectl("-n", ns, "logs", p.Name)
					return regexp.MustCompile(`x509: cannot validate certificate for 198\.18\.0\.\d+ because it doesn't contain any IP SANs`).MatchString(log), describePod(&p) + "\n" + log
				}
			}
			return false, "no pod of the new revision yet"
		})
		log := c.mustKubectl("-n", ns, "logs", bad.Name)
		t.Logf("kubectl -n kube-system logs %s | grep x509:\n%s", bad.Name, grepLines(log, "x509"))
		if !strings.Contains(log, `"Failed to scrape node"`) {
			t.Errorf("the new pod's log has no \"Failed to scrape node\":\n%s", log)
		}
		out := c.mustKubectl("-n", ns, "get", "pods", bad.Name)
		t.Logf("kubectl -n kube-system get pods:\n%s", c.mustKubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=metrics-server"))
		if r := table(out); len(r) < 2 || r[1][1] != "0/1" || r[1][2] != "Running" {
			t.Errorf("the new pod is not 0/1 Running:\n%s", out)
		}
	})

	t.Run("history-rollback", func(t *testing.T) {
		c.t = t
		out := c.mustHelm(helmHome, "history", "metrics-server", "-n", ns)
		t.Logf("helm history metrics-server -n kube-system:\n%s", out)
		if rows := table(out); len(rows) != 3 {
			t.Errorf("helm history after an install and an upgrade: want 2 revisions:\n%s", out)
		}
		c.mustHelm(helmHome, "rollback", "metrics-server", "1", "-n", ns)
		c.waitMetricsServer(t, 3)
		c.waitTopNodes(t)
		out = c.mustHelm(helmHome, "history", "metrics-server", "-n", ns)
		t.Logf("helm history after the rollback:\n%s", out)
		if !strings.Contains(out, "Rollback to 1") {
			t.Errorf("helm history has no \"Rollback to 1\":\n%s", out)
		}
		if got := c.mustHelm(helmHome, "get", "values", "metrics-server", "-n", ns); !strings.Contains(got, "- --kubelet-insecure-tls") {
			t.Errorf("helm get values after the rollback:\n%s", got)
		}
	})

	// The cure: each kubelet with serverTLSBootstrap: true (its kubelet.yaml edited, the kubelet
	// restarted, as on a kubeadm node), its CSR approved, serves a certificate the cluster's CA signed
	// with the node's address; metrics-server then needs no flag.
	t.Run("server-tls-bootstrap", func(t *testing.T) {
		c.t = t
		var names []string
		for _, n := range c.state().Nodes {
			f, err := os.OpenFile(filepath.Join(c.dir, "nodes", n.Name, "kubelet.yaml"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString("serverTLSBootstrap: true\n")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, n.Name)
		}
		if out, err := c.harness(append([]string{"cluster", "restart-kubelet", "--dir", c.dir, "--bin-dir", c.bin}, names...)...); err != nil {
			t.Fatalf("harness cluster restart-kubelet: %v\n%s", err, out)
		}
		pending := map[string]string{} // node → CSR
		c.waitFor("a kubelet-serving CSR per node", 120*time.Second, func() (bool, string) {
			var list certsv1.CertificateSigningRequestList
			if err := c.getJSON(&list, "csr"); err != nil {
				return false, err.Error()
			}
			for _, r := range list.Items {
				if r.Spec.SignerName == certsv1.KubeletServingSignerName && len(r.Status.Conditions) == 0 {
					pending[strings.TrimPrefix(r.Spec.Username, "system:node:")] = r.Name
				}
			}
			out, _ := c.kubectl("get", "csr")
			return len(pending) == len(names), out
		})
		t.Logf("kubectl get csr:\n%s", c.mustKubectl("get", "csr"))
		for _, n := range names {
			c.mustKubectl("certificate", "approve", pending[n])
		}
		c.waitFor("every kubelet-serving CSR issued", 60*time.Second, func() (bool, string) {
			out, _ := c.kubectl("get", "csr")
			return strings.Count(out, "Approved,Issued") >= len(names), out
		})
		t.Logf("kubectl get csr:\n%s", c.mustKubectl("get", "csr"))
		c.mustHelm(helmHome, "upgrade", "metrics-server", chart, "-n", ns, "--reset-values")
		c.waitMetricsServer(t, 4)
		for _, p := range c.metricsServerPods(t) {
			if strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "--kubelet-insecure-tls") {
				t.Errorf("pod %s still has --kubelet-insecure-tls", p.Name)
			}
		}
		c.waitTopNodes(t)
		if got := c.mustHelm(helmHome, "get", "values", "metrics-server", "-n", ns); strings.Contains(got, "insecure") {
			t.Errorf("helm get values:\n%s", got)
		}
	})
}

// metricsServerPods are the pods of the release, newest last.
func (c *testCluster) metricsServerPods(t *testing.T) []corev1.Pod {
	var list corev1.PodList
	if err := c.getJSON(&list, "-n", "kube-system", "pods", "-l", "app.kubernetes.io/name=metrics-server", "--sort-by", ".metadata.creationTimestamp"); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitMetricsServer waits until the Deployment of helm revision rev (its pod template's annotation is
// not set by the chart: the Deployment's generation is what moves) has all its replicas updated and
// available, and no other pod is left, and the metrics API answers.
func (c *testCluster) waitMetricsServer(t *testing.T, rev int) {
	c.waitFor(fmt.Sprintf("metrics-server (helm revision %d) available", rev), 240*time.Second, func() (bool, string) {
		var d appsv1.Deployment
		if err := c.getJSON(&d, "-n", "kube-system", "deployment", "metrics-server"); err != nil {
			return false, err.Error()
		}
		pods := c.metricsServerPods(t)
		var desc []string
		for i := range pods {
			desc = append(desc, pods[i].Name+": "+describePod(&pods[i]))
		}
		s := d.Status
		ok := d.Generation == s.ObservedGeneration && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 && s.Replicas == 1 && len(pods) == 1
		return ok, strings.Join(desc, "; ")
	})
	c.waitFor("the metrics API", 120*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
		return err == nil, out
	})
}

// waitTopNodes waits until `kubectl top nodes` has a row with CPU and memory figures for every node.
func (c *testCluster) waitTopNodes(t *testing.T) {
	var out string
	c.waitFor("kubectl top nodes to have a value for every node", 180*time.Second, func() (bool, string) {
		var err error
		out, err = c.kubectl("top", "nodes")
		if err != nil {
			return false, out
		}
		seen := 0
		for _, r := range table(out)[1:] {
			if len(r) >= 5 && strings.HasSuffix(r[1], "m") && strings.HasSuffix(r[3], "Mi") {
				seen++
			}
		}
		return seen == c.nodes, out
	})
	t.Logf("kubectl top nodes:\n%s", out)
}

// helm runs bin/helm against the cluster, its configuration and cache in home (never the user's).
func (c *testCluster) helm(home string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "helm"), append([]string{"--kubeconfig", filepath.Join(c.dir, "kubeconfig")}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *testCluster) mustHelm(home string, args ...string) string {
	c.t.Helper()
	out, err := c.helm(home, args...)
	if err != nil {
		c.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// testbinHas fails the test when a file the add-ons need is not in the bin dir, naming the target.
func testbinHas(t *testing.T, bin string, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%s is missing: make e2e-cluster builds it (make helm programs)", filepath.Join(bin, f))
		}
	}
}

// repoRoot is the repository's top directory (this package is harness/cluster/e2e).
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "..")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// csiDriverPods checks, with kubectl, the CSI drivers `up` deploys as pods in plugsim-csi: each node
// plugin DaemonSet with DESIRED, CURRENT and READY at the node count, the controller Deployment
// Available with csi-fake and the four sidecars Ready in its one pod, snapshot-controller Available.
func (c *testCluster) csiDriverPods(t *testing.T) {
	out := c.mustKubectl("-n", "plugsim-csi", "get", "ds")
	t.Logf("kubectl -n plugsim-csi get ds:\n%s", out)
	rows := table(out)
	want := map[string]bool{"csi-fake-node": true, "csi-fake-ephemeral-node": true}
	n := strconv.Itoa(c.nodes)
	for _, r := range rows[1:] {
		if want[r[0]] {
			if r[1] != n || r[2] != n || r[3] != n {
				t.Errorf("DaemonSet %s: DESIRED %s CURRENT %s READY %s, want %s each", r[0], r[1], r[2], r[3], n)
			}
			delete(want, r[0])
		}
	}
	for name := range want {
		t.Errorf("no DaemonSet %s in plugsim-csi", name)
	}
	for _, d := range []string{"csi-fake-controller", "snapshot-controller"} {
		c.mustKubectl("-n", "plugsim-csi", "wait", "--for", "condition=Available", "--timeout", "60s", "deployment/"+d)
	}
	var pods corev1.PodList
	if err := c.getJSON(&pods, "-n", "plugsim-csi", "pods", "-l", "app.kubernetes.io/component=controller"); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d controller pods, want 1", len(pods.Items))
	}
	ready := map[string]bool{}
	for _, cs := range pods.Items[0].Status.ContainerStatuses {
		ready[cs.Name] = cs.Ready
	}
	for _, name := range []string{"csi-fake", "csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"} {
		if !ready[name] {
			t.Errorf("controller pod %s: container %s not Ready (%v)", pods.Items[0].Name, name, ready)
		}
	}
	t.Logf("kubectl -n plugsim-csi get deploy,pods -o wide:\n%s", c.mustKubectl("-n", "plugsim-csi", "get", "deploy,pods", "-o", "wide"))
}
