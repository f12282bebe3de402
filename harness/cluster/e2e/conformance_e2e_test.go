//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// agnhost is the agnhost the conformance specs of e2e.test v1.37.2 run (test/utils/image/manifest.go).
const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"

// conformanceChecks are issue 25's cluster capabilities, each checked with kubectl alone (no
// e2e.test): an admission webhook that denies a pod and a conversion webhook serving a CRD's two
// versions (the API server reaching a Service's pod: --enable-aggregator-routing), agnhost netexec's
// /dial from a pod on one node to a pod on another over HTTP and UDP (asked through the API server's
// pods/proxy), a ConfigMap update seen by a running container, an in-place resize seen in the
// container's cgroup files, an ephemeral container (kubectl debug) and an exec into it, an image
// volume, and hostPort on 127.0.0.1 and on the node's address.
func conformanceChecks(t *testing.T, c *testCluster) {
	t.Run("webhook-denies-pod", func(t *testing.T) { c.t = t; c.webhookDeniesPod() })
	t.Run("conversion-webhook", func(t *testing.T) { c.t = t; c.conversionWebhook() })
	t.Run("dial-across-nodes", func(t *testing.T) { c.t = t; c.dialAcrossNodes() })
	t.Run("volume-update-live", func(t *testing.T) { c.t = t; c.volumeUpdateLive() })
	t.Run("resize-cgroup", func(t *testing.T) { c.t = t; c.resizeCgroup() })
	t.Run("ephemeral-container", func(t *testing.T) { c.t = t; c.ephemeralContainer() })
	t.Run("image-volume", func(t *testing.T) { c.t = t; c.imageVolume() })
	t.Run("hostport", func(t *testing.T) { c.t = t; c.hostPort() })
	c.t = t
}

// webhookServer runs agnhost's sub (webhook or crd-conversion-webhook) in namespace ns behind a
// Service named name on port 443, serving a certificate for name.ns.svc that a CA of the test's signed,
// and returns that CA (the caBundle of the webhook's configuration), once the pod is ready.
func (c *testCluster) webhookServer(ns, name, sub string) string {
	c.t.Helper()
	caPEM, certPEM, keyPEM := serviceCert(c.t, name+"."+ns+".svc")
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[2]s-tls, namespace: %[1]s}
type: kubernetes.io/tls
data: {tls.crt: %[4]s, tls.key: %[5]s}
---
apiVersion: v1
kind: Pod
metadata: {name: %[2]s, namespace: %[1]s, labels: {app: %[2]s}}
spec:
  containers:
  - name: server
    image: %[6]s
    args: ["%[3]s", "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key", "--port=8444"]
    readinessProbe: {httpGet: {scheme: HTTPS, path: /readyz, port: 8444}, periodSeconds: 2}
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes: [{name: certs, secret: {secretName: %[2]s-tls}}]
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {app: %[2]s}
  ports: [{port: 443, targetPort: 8444}]
`, ns, name, sub, b64(certPEM), b64(keyPEM), agnhost))
	c.waitPodIn(ns, name, 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	return b64(caPEM)
}

func (c *testCluster) webhookDeniesPod() {
	t := c.t
	c.mustKubectl("create", "namespace", "webhook-check")
	defer c.kubectl("delete", "namespace", "webhook-check", "--wait=false")
	ca := c.webhookServer("webhook-check", "deny-webhook", "webhook")
	c.apply(fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: plugsim-deny-check}
webhooks:
- name: deny.plugsim.dev
  clientConfig:
    service: {namespace: webhook-check, name: deny-webhook, path: /always-deny, port: 443}
    caBundle: %s
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  namespaceSelector: {matchLabels: {plugsim-webhook-check: deny}}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  timeoutSeconds: 10
`, ca))
	defer c.kubectl("delete", "validatingwebhookconfiguration", "plugsim-deny-check", "--wait=false")
	c.mustKubectl("create", "namespace", "webhook-denied")
	defer c.kubectl("delete", "namespace", "webhook-denied", "--wait=false")
	c.mustKubectl("label", "namespace", "webhook-denied", "plugsim-webhook-check=deny")
	pod := `apiVersion: v1
kind: Pod
metadata: {name: refused, namespace: webhook-denied}
spec: {containers: [{name: app, image: busybox:1.36, command: ["sleep", "3600"]}]}
`
	// The API server calls the pod through its Service's endpoint: until the EndpointSlice lists it
	// ready the call fails (failurePolicy Fail refuses the pod then too, with another message).
	c.waitFor("the webhook's denial", 120*time.Second, func() (bool, string) {
		out, err := c.kubectlIn(pod, "create", "-f", "-")
		if err == nil {
			c.kubectl("delete", "pod", "-n", "webhook-denied", "refused", "--wait=false")
			t.Fatalf("the pod was admitted despite the webhook: %s", out)
		}
		return strings.Contains(out, `admission webhook "deny.plugsim.dev" denied the request: this webhook denies all requests`), out
	})
	// A namespace the webhook does not select is not asked.
	out, err := c.kubectlIn(strings.Replace(pod, "webhook-denied", "webhook-check", 1), "create", "-f", "-")
	if err != nil {
		t.Errorf("a pod in a namespace the webhook does not select: %v: %s", err, out)
	}
}

func (c *testCluster) conversionWebhook() {
	t := c.t
	c.mustKubectl("create", "namespace", "conversion-check")
	defer c.kubectl("delete", "namespace", "conversion-check", "--wait=false")
	ca := c.webhookServer("conversion-check", "convert-webhook", "crd-conversion-webhook")
	// The CRD of test/e2e/apimachinery/crd_conversion_webhook.go: v1 holds "hostPort", v2 "host" and
	// "port"; the webhook converts between them.
	c.apply(fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: e2econversions.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: e2econversions, singular: e2econversion, kind: E2eConversion, listKind: E2eConversionList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {hostPort: {type: string}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {host: {type: string}, port: {type: string}}}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1, v1beta1]
      clientConfig:
        service: {namespace: conversion-check, name: convert-webhook, path: /crdconvert, port: 443}
        caBundle: %s
`, ca))
	defer c.kubectl("delete", "crd", "e2econversions.stable.example.com", "--wait=false")
	c.mustKubectl("wait", "--for=condition=Established", "crd/e2econversions.stable.example.com", "--timeout=60s")
	c.waitFor("a v1 object created", 60*time.Second, func() (bool, string) {
		out, err := c.kubectlIn(`apiVersion: stable.example.com/v1
kind: E2eConversion
metadata: {name: one, namespace: conversion-check}
hostPort: "localhost:8080"
`, "apply", "-f", "-")
		return err == nil, out
	})
	var v2 map[string]any
	c.waitFor("the object read as v2 through the webhook", 60*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "e2econversions.v2.stable.example.com", "one", "-n", "conversion-check", "-o", "json")
		if err != nil || json.Unmarshal([]byte(out), &v2) != nil {
			return false, out
		}
		return v2["host"] == "localhost" && v2["port"] == "8080" && v2["hostPort"] == nil, out
	})
	var v1 map[string]any
	if err := c.getJSON(&v1, "e2econversions.v1.stable.example.com", "one", "-n", "conversion-check"); err != nil || v1["hostPort"] != "localhost:8080" {
		t.Errorf("the object as v1: %v (%v), want hostPort localhost:8080", v1, err)
	}
}

func (c *testCluster) dialAcrossNodes() {
	t := c.t
	for _, p := range []struct{ name, node string }{{"dial-a", "node1"}, {"dial-b", "node2"}} {
		c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  containers:
  - name: netexec
    image: %s
    args: ["netexec", "--http-port=8080", "--udp-port=8081"]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}
`, p.name, p.node, agnhost))
	}
	defer c.kubectl("delete", "pod", "dial-a", "dial-b", "--wait=false")
	ready := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }
	c.waitPod("dial-a", 180*time.Second, ready)
	b := c.waitPod("dial-b", 180*time.Second, ready)
	for _, d := range []struct{ protocol, port string }{{"http", "8080"}, {"udp", "8081"}} {
		q := url.Values{"request": {"hostname"}, "protocol": {d.protocol}, "host": {b.Status.PodIP}, "port": {d.port}, "tries": {"1"}}
		path := "/api/v1/namespaces/default/pods/dial-a:8080/proxy/dial?" + q.Encode()
		var got struct{ Responses, Errors []string }
		c.waitFor("dial-a's "+d.protocol+" /dial of dial-b", 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("get", "--raw", path)
			if err != nil || json.Unmarshal([]byte(out), &got) != nil {
				return false, out
			}
			return len(got.Responses) == 1 && got.Responses[0] == "dial-b", out
		})
		t.Logf("%s /dial from dial-a (node1) to dial-b (node2, %s): %v", d.protocol, b.Status.PodIP, got.Responses)
	}
}

func (c *testCluster) volumeUpdateLive() {
	c.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: live, namespace: default}
data: {value: one}
---
apiVersion: v1
kind: Pod
metadata: {name: live-reader, namespace: default}
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "while true; do sleep 10; done"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
  volumes: [{name: cfg, configMap: {name: live}}]
`)
	defer c.kubectl("delete", "pod", "live-reader", "--wait=false")
	defer c.kubectl("delete", "configmap", "live", "--wait=false")
	c.waitPod("live-reader", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	read := func() (bool, string) {
		out, err := c.kubectl("exec", "live-reader", "--", "cat", "/cfg/value")
		return err == nil, out
	}
	if _, out := read(); out != "one" {
		c.t.Fatalf("/cfg/value before the update: %q", out)
	}
	c.mustKubectl("patch", "configmap", "live", "-p", `{"data":{"value":"two"}}`)
	// The kubelet rewrites the volume at its next sync of the pod (its atomic writer swaps ..data),
	// within a minute or so; the running container reads the new content through the same path.
	took := c.waitFor("the running container to read the updated ConfigMap", 180*time.Second, func() (bool, string) {
		ok, out := read()
		return ok && out == "two", out
	})
	c.t.Logf("the update reached the running container in %v", took.Round(time.Second))
}

func (c *testCluster) resizeCgroup() {
	t := c.t
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: resize, namespace: default}
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "while true; do sleep 10; done"]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}
`)
	defer c.kubectl("delete", "pod", "resize", "--wait=false")
	c.waitPod("resize", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	cgroup := func() (cpuMax, memMax string, weight int) {
		out, err := c.kubectl("exec", "resize", "--", "sh", "-c", "head -n 1 /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.weight; mount -t cgroup2")
		if err != nil {
			t.Fatalf("reading the cgroup files: %v: %s", err, out)
		}
		var vals []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, "==>") && !strings.Contains(l, " type cgroup2 ") {
				vals = append(vals, l)
			}
		}
		if !strings.Contains(out, "on /sys/fs/cgroup type cgroup2") || len(vals) != 3 {
			t.Fatalf("the cgroup files and mount -t cgroup2: %q", out)
		}
		fmt.Sscan(vals[2], &weight)
		return vals[0], vals[1], weight
	}
	cpu, mem, w := cgroup()
	if cpu != "20000 100000" || mem != "67108864" {
		t.Errorf("before the resize: cpu.max %q memory.max %q, want \"20000 100000\" and 67108864 (200m, 64Mi)", cpu, mem)
	}
	c.mustKubectl("patch", "pod", "resize", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m","memory":"32Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}`)
	c.waitPod("resize", 120*time.Second, func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if r := s.Resources; r != nil && r.Limits.Cpu().MilliValue() == 300 && r.Limits.Memory().Value() == 96<<20 {
				return p.Status.ObservedGeneration >= p.Generation
			}
		}
		return false
	})
	cpu2, mem2, w2 := cgroup()
	if cpu2 != "30000 100000" || mem2 != "100663296" || w2 <= w {
		t.Errorf("after the resize: cpu.max %q memory.max %q cpu.weight %d (was %d), want \"30000 100000\", 100663296 (300m, 96Mi) and a larger weight (150m over 100m)", cpu2, mem2, w2, w)
	}
	var p corev1.Pod
	if err := c.getJSON(&p, "pod", "resize"); err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the resize restarted the container (%d restarts): the policy is NotRequired", p.Status.ContainerStatuses[0].RestartCount)
	}
}

func (c *testCluster) ephemeralContainer() {
	t := c.t
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: debug-target, namespace: default}
spec:
  containers:
  - {name: app, image: busybox:1.36, command: ["sleep", "10000"]}
`)
	defer c.kubectl("delete", "pod", "debug-target", "--wait=false")
	c.waitPod("debug-target", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	c.mustKubectl("debug", "debug-target", "--image=busybox:1.36", "--container=debugger", "--", "sh", "-c", "while true; do echo polo; sleep 2; done")
	c.waitPod("debug-target", 120*time.Second, func(p *corev1.Pod) bool {
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == "debugger" && s.State.Running != nil {
				return true
			}
		}
		return false
	})
	if out, err := c.kubectl("exec", "debug-target", "-c", "debugger", "--", "/bin/echo", "marco"); err != nil || out != "marco\n" {
		t.Errorf("exec into the ephemeral container: %v, %q", err, out)
	}
	c.waitFor("the ephemeral container's log", 60*time.Second, func() (bool, string) {
		out, _ := c.kubectl("logs", "debug-target", "-c", "debugger")
		return strings.Contains(out, "polo"), out
	})
}

func (c *testCluster) imageVolume() {
	t := c.t
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: image-volume, namespace: default}
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "while true; do sleep 10; done"]
    volumeMounts: [{name: kitten, mountPath: /volume}]
  volumes:
  - name: kitten
    image: {reference: registry.k8s.io/e2e-test-images/kitten:1.8, pullPolicy: IfNotPresent}
`)
	defer c.kubectl("delete", "pod", "image-volume", "--wait=false")
	c.waitPod("image-volume", 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	for file, want := range map[string]string{"/volume/data.json": "kitten.jpg", "/volume/etc/os-release": "Alpine Linux"} {
		if out, err := c.kubectl("exec", "image-volume", "--", "cat", file); err != nil || !strings.Contains(out, want) {
			t.Errorf("cat %s: %v, %q; want %q in it", file, err, out, want)
		}
	}
	if out, err := c.kubectl("exec", "image-volume", "--", "touch", "/volume/x"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("touch in the image volume: %v, %q; want Read-only file system", err, out)
	}
}

func (c *testCluster) hostPort() {
	nodeIP := "198.18.0.11" // node1
	for _, p := range []struct{ name, hostIP string }{{"hp-local", "127.0.0.1"}, {"hp-node", nodeIP}} {
		c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: node1}
  containers:
  - name: netexec
    image: %s
    args: ["netexec", "--http-port=8080", "--udp-port=-1"]
    ports: [{containerPort: 8080, hostPort: 54323, hostIP: %s, protocol: TCP}]
    # As network/hostport.go probes it: without a UDP server netexec's /healthz stays 412.
    readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 2}
`, p.name, agnhost, p.hostIP))
	}
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hp-client, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: node1}
  hostNetwork: true
  containers: [{name: app, image: %s}]
`, agnhost))
	defer c.kubectl("delete", "pod", "hp-local", "hp-node", "hp-client", "--wait=false")
	ready := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }
	for _, n := range []string{"hp-local", "hp-node", "hp-client"} {
		c.waitPod(n, 180*time.Second, ready)
	}
	// network/hostport.go's commands: 127.0.0.1 from the node's address (portmap DNATs it with
	// route_localnet), and the node's address.
	for url, want := range map[string]string{
		"--interface " + nodeIP + " http://127.0.0.1:54323/hostname": "hp-local",
		"http://" + nodeIP + ":54323/hostname":                       "hp-node",
	} {
		took := c.waitFor("hostPort "+url, 60*time.Second, func() (bool, string) {
			out, err := c.kubectl("exec", "hp-client", "--", "sh", "-c", "curl -g -s --connect-timeout 5 "+url)
			return err == nil && out == want, out
		})
		c.t.Logf("curl %s from the node's network answered %s (%v)", url, want, took.Round(time.Millisecond))
	}
}

// waitPodIn is waitPod in namespace ns.
func (c *testCluster) waitPodIn(ns, name string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	c.t.Helper()
	var p corev1.Pod
	c.waitFor("pod "+ns+"/"+name, timeout, func() (bool, string) {
		if err := c.getJSON(&p, "pod", "-n", ns, name); err != nil {
			return false, err.Error()
		}
		return cond(&p), describePod(&p)
	})
	return &p
}

// serviceCert makes a CA and a serving certificate for host signed by it, in PEM.
func serviceCert(t testing.TB, host string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "plugsim e2e webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
