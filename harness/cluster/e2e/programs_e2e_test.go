//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/cri-fake/oci"
	"github.com/plugsim/plugsim/harness/cluster"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/testbin"
)

// programContainers is issue 26's acceptance in a cluster: a Deployment of a program image (etcd under
// the real runc) Running and Ready; kubectl logs; kubectl exec of a command its root has and of one it
// lacks (containerd's error); stats from its cgroup; a memory limit it exceeds (OOMKilled, 137); a delete
// that stops it with its stop signal within the grace period; every runc call on the node's OCI lane, and
// none for a simulated workload or for the same image under RuntimeClass gvisor (handler plugsim-gvisor).
func (c *testCluster) programContainers(t *testing.T) {
	c.t = t
	testbin.Path(t, "runc") // without it the nodes run no program containers
	manifest, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "programs", "etcd-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.apply(string(manifest))
	var pod *corev1.Pod
	c.waitFor("the store Deployment's pod Running and Ready", 180*time.Second, func() (bool, string) {
		var list corev1.PodList
		if err := c.getJSON(&list, "pods", "-l", "app=store"); err != nil || len(list.Items) != 1 {
			return false, "no pod yet"
		}
		pod = &list.Items[0]
		return pod.Status.Phase == corev1.PodRunning && podReady(pod), describePod(pod)
	})
	t.Logf("kubectl get pods -l app=store -o wide:\n%s", c.mustKubectl("get", "pods", "-l", "app=store", "-o", "wide"))
	name, node := pod.Name, pod.Spec.NodeName
	ctrID := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "cri-fake://")

	if logs := c.mustKubectl("logs", name); !strings.Contains(logs, "serving client traffic") {
		t.Errorf("kubectl logs %s: no 'serving client traffic' line:\n%s", name, logs)
	}
	if out := c.mustKubectl("exec", name, "--", "/usr/local/bin/etcd", "--version"); !strings.Contains(out, "etcd Version: 3.6.16") {
		t.Errorf("kubectl exec etcd --version: %q", out)
	}
	out, err := c.kubectl("exec", name, "--", "ls", "/")
	if want := `OCI runtime exec failed: exec failed: unable to start container process: exec: "ls": executable file not found in $PATH: unknown`; err == nil || !strings.Contains(out, want) {
		t.Errorf("kubectl exec ls in a root without it: err=%v, %q; want containerd's %q", err, out, want)
	}

	// The kubelet's summary API (kubectl top's source) reports the container's cgroup: its working set
	// is no more than the memory cgroup's usage, read here from the node's cgroup directory.
	var summary struct {
		Pods []struct {
			PodRef     struct{ Name string }
			Containers []struct {
				Name   string
				Memory struct{ WorkingSetBytes uint64 }
				CPU    struct{ UsageCoreNanoSeconds uint64 }
			}
		}
	}
	c.waitFor("the store pod in the kubelet's stats summary", 60*time.Second, func() (bool, string) {
		raw, err := c.kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")
		if err != nil || json.Unmarshal([]byte(raw), &summary) != nil {
			return false, raw
		}
		for _, p := range summary.Pods {
			if p.PodRef.Name == name && len(p.Containers) == 1 && p.Containers[0].Memory.WorkingSetBytes > 0 {
				ws := p.Containers[0].Memory.WorkingSetBytes
				usage := cgroupMemoryUsage(t, filepath.Join(c.dir, "nodes", node, "cri", "oci"), "/"+cluster.PrefixFor(c.dir)+"-"+node, ctrID)
				if ws > usage+16<<20 || ws < 1<<20 || p.Containers[0].CPU.UsageCoreNanoSeconds == 0 {
					t.Errorf("summary: working set %d, cgroup usage %d, cpu %d", ws, usage, p.Containers[0].CPU.UsageCoreNanoSeconds)
				}
				return true, ""
			}
		}
		return false, "not yet"
	})

	// A memory limit under what etcd needs to start: the kernel's OOM killer, reported as containerd does.
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: squeezed, namespace: default}
spec:
  restartPolicy: Never
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.7.0-0
    command: [/usr/local/bin/etcd, --data-dir=/var/lib/etcd]
    resources: {limits: {memory: 4Mi}}
`)
	oom := c.waitPod("squeezed", 120*time.Second, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if term := oom.Status.ContainerStatuses[0].State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("past its memory limit: %s %d, want OOMKilled 137", term.Reason, term.ExitCode)
	}

	// The same image under RuntimeClass gvisor (created by the runtimeclass check) is simulated.
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: store-gvisor, namespace: default}
spec:
  runtimeClassName: gvisor
  containers:
  - {name: etcd, image: "registry.k8s.io/etcd:3.7.0-0", command: [/usr/local/bin/etcd]}
`)
	gv := c.waitPod("store-gvisor", 120*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	gvID := strings.TrimPrefix(gv.Status.ContainerStatuses[0].ContainerID, "cri-fake://")

	// Deleted with a grace period: runc kill with SIGTERM, etcd's clean exit, no SIGKILL.
	start := time.Now()
	c.mustKubectl("delete", "deployment", "store", "--wait=true")
	c.waitFor("the store pod gone", 60*time.Second, func() (bool, string) {
		out, _ := c.kubectl("get", "pods", "-l", "app=store", "--no-headers")
		return strings.TrimSpace(out) == "" || strings.Contains(out, "No resources"), out
	})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the pod took %v to go, past its 20 s grace period", took)
	}
	calls := ociCalls(t, filepath.Join(c.dir, "nodes", node, "cri.jsonl"))
	var methods, kills []string
	for _, ev := range calls[ctrID] {
		methods = append(methods, ev.Method)
		if ev.Method == "kill" {
			kills = append(kills, ev.Attrs["args"])
		}
	}
	t.Logf("runc calls for the store container: %v", methods)
	for _, want := range []string{"create", "start", "exec", "kill", "delete"} {
		if !strings.Contains(" "+strings.Join(methods, " ")+" ", " "+want+" ") {
			t.Errorf("no runc %s on the OCI lane for the store container: %v", want, methods)
		}
	}
	if len(kills) != 1 || !strings.HasSuffix(kills[0], " 15") {
		t.Errorf("runc kills %q: want one SIGTERM (etcd exits on it within the grace period)", kills)
	}
	if gvNode := gv.Spec.NodeName; len(ociCalls(t, filepath.Join(c.dir, "nodes", gvNode, "cri.jsonl"))[gvID]) != 0 {
		t.Errorf("the plugsim-gvisor pod's container crossed to runc")
	}
	c.mustKubectl("delete", "pod", "squeezed", "store-gvisor", "--wait=false")
}

// ociCalls reads a node's cri-fake trace and returns its runc calls by container ID.
func ociCalls(t *testing.T, path string) map[string][]trace.Event {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]trace.Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"interface":"OCI"`) {
			continue
		}
		var ev trace.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out[ev.Attrs["containerID"]] = append(out[ev.Attrs["containerID"]], ev)
		}
	}
	return out
}

// cgroupMemoryUsage is the memory cgroup's usage of a program container (cgroup v1's
// memory.usage_in_bytes, v2's memory.current), under the parent cri-fake recorded in its state, which
// is in the node's cgroup namespace, rooted at the node's cgroup nodeCgroup.
func cgroupMemoryUsage(t *testing.T, ociState, nodeCgroup, id string) uint64 {
	dirs, err := oci.CgroupDirs(ociState, nodeCgroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		for _, f := range []string{"memory.usage_in_bytes", "memory.current"} {
			if b, err := os.ReadFile(filepath.Join(d, id, f)); err == nil && (strings.Contains(d, "/memory/") || f == "memory.current") {
				n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
				return n
			}
		}
	}
	t.Fatalf("no memory cgroup for container %s under %v", id, dirs)
	return 0
}

// aggregatedAPI is the aggregated-API conformance spec's set-up (test/e2e/apimachinery/aggregator.go of
// e2e.test v1.37.2, "should be able to support the 1.17 Sample API Server using the current Aggregator")
// done with kubectl alone: sample-apiserver and etcd, both program images under runc, in one pod of a
// Deployment with the spec's arguments, its serving certificate in a Secret, the RBAC the spec grants
// (auth-delegator, the authentication reader), a Service on 7443, and the APIService
// v1alpha1.wardle.example.com with its CA. The API server then reaches the pod (aggregator routing)
// and serves flunders through it: created, listed and deleted with kubectl, stored in the pod's etcd.
func (c *testCluster) aggregatedAPI(t *testing.T) {
	c.t = t
	testbin.Path(t, "runc")
	testbin.Path(t, filepath.Join("programs", "sample-apiserver"))
	const ns = "wardle-check"
	c.mustKubectl("create", "namespace", ns)
	defer c.kubectl("delete", "namespace", ns, "--wait=false")
	caPEM, certPEM, keyPEM := serviceCert(t, "sample-api."+ns+".svc")
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: sample-apiserver-secret, namespace: %[1]s}
type: Opaque
data: {tls.crt: %[2]s, tls.key: %[3]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: wardle-check-sample-apiserver}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [admissionregistration.k8s.io], resources: ["*"], verbs: [get, list, watch]}
- {apiGroups: [flowcontrol.apiserver.k8s.io], resources: [prioritylevelconfigurations, flowschemas], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: wardle-check-sample-apiserver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: wardle-check-sample-apiserver}
subjects: [{kind: ServiceAccount, name: default, namespace: %[1]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "wardler:%[1]s:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: default, namespace: %[1]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: wardle-check-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: %[1]s}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sample-apiserver-deployment, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: sample-apiserver, apiserver: "true"}}
  template:
    metadata: {labels: {app: sample-apiserver, apiserver: "true"}}
    spec:
      containers:
      - name: sample-apiserver
        image: registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2
        args: [--etcd-servers=http://127.0.0.1:2379, --tls-cert-file=/apiserver.local.config/certificates/tls.crt,
          --tls-private-key-file=/apiserver.local.config/certificates/tls.key, --audit-log-path=-, --audit-log-maxage=0, --audit-log-maxbackup=0]
        readinessProbe: {httpGet: {scheme: HTTPS, port: 443, path: /readyz}, initialDelaySeconds: 20, periodSeconds: 1}
        volumeMounts: [{name: apiserver-certs, readOnly: true, mountPath: /apiserver.local.config/certificates}]
      - name: etcd
        image: registry.k8s.io/etcd:3.7.0-0
        command: [/usr/local/bin/etcd, --listen-client-urls, http://127.0.0.1:2379, --advertise-client-urls, http://127.0.0.1:2379]
      volumes: [{name: apiserver-certs, secret: {secretName: sample-apiserver-secret}}]
---
apiVersion: v1
kind: Service
metadata: {name: sample-api, namespace: %[1]s}
spec:
  selector: {apiserver: "true"}
  ports: [{protocol: TCP, port: 7443, targetPort: 443}]
`, ns, b64(certPEM), b64(keyPEM)))
	defer c.kubectl("delete", "clusterrole,clusterrolebinding", "wardle-check-sample-apiserver", "--wait=false")
	defer c.kubectl("delete", "clusterrolebinding", "wardler:"+ns+":auth-delegator", "--wait=false")
	defer c.kubectl("delete", "rolebinding", "-n", "kube-system", "wardle-check-auth-reader", "--wait=false")
	if out, err := c.kubectl("rollout", "status", "-n", ns, "deployment/sample-apiserver-deployment", "--timeout=240s"); err != nil {
		t.Fatalf("the sample-apiserver Deployment: %v: %s\n%s", err, out, c.mustKubectl("get", "pods", "-n", ns, "-o", "wide"))
	}
	c.apply(fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.wardle.example.com}
spec:
  service: {namespace: %s, name: sample-api, port: 7443}
  group: wardle.example.com
  version: v1alpha1
  caBundle: %s
  groupPriorityMinimum: 2000
  versionPriority: 200
`, ns, b64(caPEM)))
	defer c.kubectl("delete", "apiservice", "v1alpha1.wardle.example.com", "--wait=false")
	c.waitFor("the APIService v1alpha1.wardle.example.com Available", 120*time.Second, func() (bool, string) {
		out, err := c.kubectl("get", "apiservice", "v1alpha1.wardle.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.status.conditions[?(@.type==\"Available\")].message}")
		return err == nil && strings.HasPrefix(out, "True"), out
	})
	flunder := `apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: rest-flunder, namespace: default, labels: {sample-label: "true"}}
`
	c.waitFor("a flunder created through the aggregated API", 60*time.Second, func() (bool, string) {
		out, err := c.kubectlIn(flunder, "create", "-f", "-")
		return err == nil || strings.Contains(out, "AlreadyExists"), out
	})
	// sample-apiserver marks v1alpha1 deprecated: kubectl prints its warning on stderr, left out here.
	if out := withoutWarnings(c.mustKubectl("get", "flunders", "-n", "default", "-o", "name")); out != "flunder.wardle.example.com/rest-flunder" {
		t.Errorf("kubectl get flunders: %q, want the one created", out)
	}
	c.mustKubectl("delete", "flunder", "-n", "default", "rest-flunder")
	if out := withoutWarnings(c.mustKubectl("get", "flunders", "-n", "default", "-o", "name")); out != "" {
		t.Errorf("kubectl get flunders after the delete: %q, want none", out)
	}
	t.Logf("kubectl get apiservice v1alpha1.wardle.example.com:\n%s", c.mustKubectl("get", "apiservice", "v1alpha1.wardle.example.com"))
}

// withoutWarnings drops the API server's warnings kubectl prints ("Warning: ..." lines) from out.
func withoutWarnings(out string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "Warning: ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
