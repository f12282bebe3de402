//go:build e2e

package e2e

import (
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// dnsChecks are issue 27's DNS checks, through kubectl only: CoreDNS (kubeadm's add-on, which `up`
// deploys: action_clusterdns.go) runs in kube-system behind kube-dns as on a kubeadm cluster; from a
// pod on node3, a ClusterIP Service's short name (search path, ndots:5) answers from more than one
// backend, kubernetes.default.svc.cluster.local, SRV and PTR resolve; a headless Service resolves to
// every pod IP; an ExternalName Service resolves to its CNAME, and to the new one once it is changed.
// The client is agnhost, whose dig, nslookup and curl are Alpine's (simulated: cri-fake/process).
func dnsChecks(t *testing.T, c *testCluster) {
	c.t = t
	t.Run("kube-system-coredns", func(t *testing.T) {
		c.t = t
		out := c.mustKubectl("-n", "kube-system", "get", "pods,svc")
		pods := regexp.MustCompile(`(?m)^pod/coredns-[a-z0-9]+-[a-z0-9]+\s+1/1\s+Running\s`).FindAllString(out, -1)
		svc := regexp.MustCompile(`(?m)^service/kube-dns\s+ClusterIP\s+198\.18\.128\.10\s+<none>\s+53/UDP,53/TCP,9153/TCP\s`)
		if len(pods) != 2 || !svc.MatchString(out) {
			t.Errorf("kubectl -n kube-system get pods,svc: want 2 coredns pods 1/1 Running and service/kube-dns ClusterIP 198.18.128.10 53/UDP,53/TCP,9153/TCP; got:\n%s", out)
		}
	})

	c.t = t
	c.apply(netexecBackends("named") + `apiVersion: v1
kind: Service
metadata: {name: named, namespace: default}
spec:
  selector: {app: named}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: named-headless, namespace: default}
spec:
  clusterIP: None
  selector: {app: named}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: default}
spec:
  type: ExternalName
  externalName: first.example.com
---
apiVersion: v1
kind: Pod
metadata: {name: dns-client, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: node3}
  containers:
  - name: app
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["pause"]
`)
	c.mustKubectl("rollout", "status", "deployment/named", "--timeout=180s")
	c.waitPod("dns-client", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	var svc corev1.Service
	if err := c.getJSON(&svc, "service", "named"); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.getJSON(&pods, "pods", "-l", "app=named"); err != nil {
		t.Fatal(err)
	}
	var podIPs []string
	for _, p := range pods.Items {
		podIPs = append(podIPs, p.Status.PodIP)
	}
	sort.Strings(podIPs)
	// in runs a shell script in the client pod and returns its output (stdout and stderr).
	in := func(script string) string {
		c.t.Helper()
		out, err := c.kubectl("exec", "dns-client", "--", "sh", "-c", script)
		if err != nil {
			c.t.Errorf("in dns-client: %s: %v\n%s", script, err, out)
		}
		return out
	}

	t.Run("dns-by-name", func(t *testing.T) {
		c.t = t
		// The short name through the search path (ndots:5), fetched 12 times through the ClusterIP,
		// until node3's kube-proxy has programmed more than one backend (it does so a moment after
		// rollout status returns).
		c.waitFor("12 answers to http://named/hostname from node3, from at least 2 backends", 120*time.Second, func() (bool, string) {
			out, _ := c.kubectl("exec", "dns-client", "--", "sh", "-c", "for i in $(seq 12); do curl -s -m 5 http://named/hostname; echo; done")
			got := strings.Fields(out)
			seen := map[string]bool{}
			for _, h := range got {
				if strings.HasPrefix(h, "named-") {
					seen[h] = true
				}
			}
			return len(got) == 12 && len(seen) >= 2, out
		})
		want := map[string]string{
			"nslookup kubernetes.default.svc.cluster.local":             `(?s)^Server:\t\t198\.18\.128\.10\nAddress:\t198\.18\.128\.10#53\n\nName:\tkubernetes\.default\.svc\.cluster\.local\nAddress: 198\.18\.128\.1\n\n$`,
			"getent hosts named":                                        `^` + regexp.QuoteMeta(svc.Spec.ClusterIP) + `\s+named\.default\.svc\.cluster\.local\s+named\n$`,
			"dig +tcp +noall +answer +search named A":                   `^named\.default\.svc\.cluster\.local\.\s+30\s+IN\s+A\s+` + regexp.QuoteMeta(svc.Spec.ClusterIP) + `\n$`,
			"dig +short SRV _http._tcp.named.default.svc.cluster.local": `^0 100 80 named\.default\.svc\.cluster\.local\.\n$`,
			"dig +short -x " + svc.Spec.ClusterIP:                       `^named\.default\.svc\.cluster\.local\.\n$`,
		}
		for script, re := range want {
			if out := in(script); !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s printed:\n%s\nwant it to match %s", script, out, re)
			}
		}
	})
	t.Run("headless", func(t *testing.T) {
		c.t = t
		got := strings.Fields(in("dig +short named-headless.default.svc.cluster.local | sort"))
		if strings.Join(got, " ") != strings.Join(podIPs, " ") {
			t.Errorf("the headless Service named-headless resolved to %v; its pods are %v", got, podIPs)
		}
	})
	t.Run("externalname", func(t *testing.T) {
		c.t = t
		if out := in("dig +short ext.default.svc.cluster.local CNAME"); out != "first.example.com.\n" {
			t.Errorf("ExternalName ext resolved to %q, want its CNAME first.example.com.", out)
		}
		// Changed live: CoreDNS follows the Service (no cache for cluster.local in kubeadm's Corefile).
		c.mustKubectl("patch", "service", "ext", "-p", `{"spec":{"externalName":"second.example.com"}}`)
		c.waitFor("ext's new CNAME", 60*time.Second, func() (bool, string) {
			out, _ := c.kubectl("exec", "dns-client", "--", "dig", "+short", "ext.default.svc.cluster.local", "CNAME")
			return out == "second.example.com.\n", out
		})
	})
	c.t = t
	c.mustKubectl("delete", "deployment", "named", "--wait=false")
	c.mustKubectl("delete", "service", "named", "named-headless", "ext", "--wait=false")
	c.mustKubectl("delete", "pod", "dns-client", "--wait=false")
}
