//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// serviceChecks are issue 27's Service checks, through kubectl only: a Deployment of three netexec pods
// behind a ClusterIP Service answers from a pod on another node with replies from more than one backend;
// its NodePort answers on every node's address, from a pod and from a host-network pod; a Service with
// sessionAffinity ClientIP keeps one client on one backend. The real kube-proxy of each node programs
// them (action_kubeproxy.go).
func serviceChecks(t *testing.T, c *testCluster) {
	c.t = t
	c.apply(netexecBackends("backends") + `apiVersion: v1
kind: Service
metadata: {name: backends, namespace: default}
spec:
  type: NodePort
  selector: {app: backends}
  ports: [{port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: default}
spec:
  selector: {app: backends}
  sessionAffinity: ClientIP
  ports: [{port: 80, targetPort: 8080}]
`)
	c.mustKubectl("rollout", "status", "deployment/backends", "--timeout=180s")
	var svc, sticky corev1.Service
	if err := c.getJSON(&svc, "service", "backends"); err != nil {
		t.Fatal(err)
	}
	if err := c.getJSON(&sticky, "service", "sticky"); err != nil {
		t.Fatal(err)
	}
	// hostnames runs a client pod on node (host-network when hostNet) that fetches url n times, and
	// returns the backends that answered, one per line as netexec's /hostname prints them.
	hostnames := func(name, node string, hostNet bool, url string, n int) []string {
		c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  hostNetwork: %v
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "for i in $(seq %d); do wget -T 5 -qO- %s/hostname; echo; done"]
`, name, node, hostNet, n, url))
		p := c.waitPod(name, 180*time.Second, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		out := c.mustKubectl("logs", name)
		c.mustKubectl("delete", "pod", name, "--wait=false")
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("%s: %s; its log:\n%s", name, describePod(p), out)
		}
		return strings.Fields(out)
	}
	distinct := func(names []string) []string {
		seen := map[string]bool{}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, "backends-") && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out
	}

	t.Run("clusterip-across-nodes", func(t *testing.T) {
		c.t = t
		// rollout status returns once the pods are Ready; node3's kube-proxy programs them a moment
		// later (EndpointSlice, then its sync): until it has, every answer comes from the backends it
		// had. So the check is a wait for the condition, each try a client pod of its own.
		try := 0
		c.waitFor("12 answers from at least 2 backends through the ClusterIP "+svc.Spec.ClusterIP+" from node3", 120*time.Second, func() (bool, string) {
			try++
			got := hostnames(fmt.Sprintf("svc-client-%d", try), "node3", false, "http://"+svc.Spec.ClusterIP, 12)
			return len(got) == 12 && len(distinct(got)) >= 2, fmt.Sprint(got)
		})
	})
	t.Run("nodeport-every-node", func(t *testing.T) {
		c.t = t
		for i, node := range []string{"node1", "node2", "node3"} {
			ip := fmt.Sprintf("198.18.0.%d", 11+i)
			for _, hostNet := range []bool{false, true} {
				name := fmt.Sprintf("np-client-%d-%v", i, hostNet)
				// From another node: node1's client asks node2's address, and so on round.
				from := []string{"node2", "node3", "node1"}[i]
				got := hostnames(name, from, hostNet, "http://"+ip+":30080", 2)
				if len(distinct(got)) == 0 {
					t.Errorf("NodePort 30080 on %s (%s) from %s (hostNetwork %v) answered %v", node, ip, from, hostNet, got)
				}
			}
		}
	})
	t.Run("session-affinity-clientip", func(t *testing.T) {
		c.t = t
		got := hostnames("sticky-client", "node2", false, "http://"+sticky.Spec.ClusterIP, 10)
		if d := distinct(got); len(got) != 10 || len(d) != 1 {
			t.Errorf("10 fetches through the ClientIP-affine Service %s answered %v: want 10 answers from one backend", sticky.Spec.ClusterIP, got)
		}
	})
	c.t = t
	c.mustKubectl("delete", "deployment", "backends", "--wait=false")
	c.mustKubectl("delete", "service", "backends", "sticky", "--wait=false")
}

// netexecBackends is a Deployment of 3 agnhost netexec pods labelled app=name, each Ready once its
// /healthz answers on 8080 (the backends of the Service and DNS checks), and a document separator.
func netexecBackends(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["netexec", "--http-port=8080"]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}
---
`, name)
}
