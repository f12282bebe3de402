//go:build e2e

// Package kubelet_test runs a real kubelet v1.37.2 on plugsim's fakes: cri-fake (real network
// namespaces), the cni-fake (veth) → portmap chain, and csi-fake registered through the kubelet's
// plugin watcher, all inside a throw-away network namespace acting as the node.
package kubelet_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# What a standalone kubelet (static pods, no API server) needs on this machine: no swap check,
# no cgroup v1 refusal, no QoS cgroups or allocatable enforcement (this machine's cgroups are not
# the kubelet's to manage); the keys are in https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/.
failSwapOn: false
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
cgroupDriver: cgroupfs
address: 127.0.0.1
readOnlyPort: 10255
healthzBindAddress: 127.0.0.1
staticPodPath: {{dir}}/manifests
containerRuntimeEndpoint: unix://{{dir}}/cri.sock
podLogsDir: {{dir}}/logs
fileCheckFrequency: 1s
syncFrequency: 10s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
`

const conflist = `{
  "cniVersion": "1.1.0",
  "name": "plugsim",
  "plugins": [
    {
      "type": "cni-fake",
      "mode": "veth",
      "dataDir": "{{dir}}/cni/data",
      "logFile": "{{dir}}/cni.jsonl",
      "ipam": {"type": "cni-fake", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
  ]
}
`

func (n *node) template(s string) []byte { return []byte(strings.ReplaceAll(s, "{{dir}}", n.dir)) }

// startFakes starts cri-fake, csi-fake (node plugin, registering itself) and the kubelet.
func (n *node) startFakes() {
	n.t.Helper()
	n.writeFile("cni/net.d/10-plugsim.conflist", n.template(conflist))
	n.writeFile("kubelet.yaml", n.template(kubeletConfig))
	n.start("cri-fake", filepath.Join(n.bin, "cri-fake"),
		"--endpoint", "unix://"+n.path("cri.sock"),
		"--root-dir", n.path("cri"),
		"--state-dir", n.path("state/cri"),
		"--netns", "real",
		"--cni-conf-dir", n.path("cni/net.d"),
		"--cni-bin-dir", n.bin,
		"--trace", n.path("cri.jsonl"))
	csiSock := n.path("kubelet/plugins/csi.plugsim.dev/csi.sock")
	n.start("csi-fake", filepath.Join(n.bin, "csi-fake"),
		"--endpoint", "unix://"+csiSock,
		"--mode", "node",
		"--node-id", "node1",
		"--state-dir", n.path("state/csi"),
		"--register",
		"--plugin-registry-dir", n.path("kubelet/plugins_registry"),
		"--trace", n.path("csi.jsonl"))
	n.waitFor("the fakes' sockets", 20*time.Second, func() (bool, string) {
		for _, s := range []string{n.path("cri.sock"), csiSock, n.path("kubelet/plugins_registry/csi.plugsim.dev-reg.sock")} {
			if _, err := os.Stat(s); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	n.kubelet = n.start("kubelet", filepath.Join(n.bin, "kubelet"),
		"--config", n.path("kubelet.yaml"),
		"--root-dir", n.path("kubelet"),
		"--hostname-override", "node1",
		// Without it the kubelet resolves its host name through DNS each time it builds its node
		// object (for every pod it admits), and with no DNS server in reach each lookup waits out
		// its 10 s timeout: 50 static pods would take eight minutes to be admitted.
		"--node-ip", nodeAddr,
		"--v", "2")
	n.waitFor("the kubelet's read-only port", 60*time.Second, func() (bool, string) {
		_, err := n.pods()
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func containerStatus(p *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs, true
		}
	}
	return corev1.ContainerStatus{}, false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s ready=%v ip=%s", p.Status.Phase, podReady(p), p.Status.PodIP)
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, " [%s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
		switch {
		case cs.State.Running != nil:
			b.WriteString(" running")
		case cs.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit=%d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		b.WriteString("]")
	}
	return b.String()
}

// waitPod waits until the named pod satisfies cond, returning how long it took.
func (n *node) waitPod(name string, timeout time.Duration, cond func(*corev1.Pod) bool) time.Duration {
	n.t.Helper()
	return n.waitFor("pod "+name, timeout, func() (bool, string) {
		p, ok := n.pod(name)
		if !ok {
			return false, "not in the kubelet's /pods yet"
		}
		return cond(p), describe(p)
	})
}

func countCalls(evs []trace.Event, iface, method string) int {
	c := 0
	for _, ev := range evs {
		if ev.Interface == iface && ev.Method == method {
			c++
		}
	}
	return c
}

// TestKubeletOnFakes is the whole suite on one node: the kubelet takes tens of seconds to start
// and one node serves every manifest, as one real node would.
func TestKubeletOnFakes(t *testing.T) {
	n := newNode(t)
	n.startFakes()

	t.Run("csi-registration", func(t *testing.T) {
		// The kubelet's plugin watcher finds csi-fake's registration socket and runs the exchange.
		n.waitFor("GetInfo → NodeGetInfo → NotifyRegistrationStatus in csi-fake's trace", 60*time.Second, func() (bool, string) {
			evs := n.traceEvents("csi.jsonl")
			var seen []string
			for _, ev := range evs {
				seen = append(seen, ev.Interface+" "+ev.Method)
			}
			return countCalls(evs, trace.Registration, "GetInfo") > 0 && countCalls(evs, trace.CSI, "NodeGetInfo") > 0 &&
				countCalls(evs, trace.Registration, "NotifyRegistrationStatus") > 0, strings.Join(seen, ", ")
		})
		for _, ev := range n.traceEvents("csi.jsonl")[:3] {
			t.Logf("%s ──%s──▶ %s  %s %s %s", ev.Caller, ev.Interface, ev.Callee, ev.Method, ev.Request, ev.Response)
		}
	})

	t.Run("nginx-hostport", func(t *testing.T) {
		n.t = t
		n.addManifest("1-nginx-hostport.yaml")
		took := n.waitPod("web", 90*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
		n.webRunning = time.Now()
		t.Logf("manifest → Running and Ready: %v", took.Round(time.Millisecond))
		// Through the node's address, portmap's DNAT and the pod's veth, to the simulated nginx.
		var body string
		n.waitFor("GET http://"+nodeAddr+":8080/", 30*time.Second, func() (bool, string) {
			resp, err := n.httpClient().Get("http://" + nodeAddr + ":8080/")
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == 200, resp.Status
		})
		if !strings.Contains(strings.ToLower(body), "nginx") {
			t.Errorf("the answer through portmap does not come from nginx: %q", body)
		}
		out, _ := exec.Command("ip", "netns", "exec", n.name, "iptables", "-t", "nat", "-S").CombinedOutput()
		if !strings.Contains(string(out), "--dport 8080") {
			t.Errorf("no portmap DNAT rule for 8080 in the node's nat table:\n%s", out)
		}
	})

	t.Run("boundary-trace", func(t *testing.T) {
		n.t = t
		// What the kubelet called, as the fakes recorded it, drawn the way the harness draws its
		// scenarios. The PLEG relists (every second) and the housekeeping calls would drown the
		// picture, so it shows the first of each and every call that changed something.
		var keep []trace.Event
		seen := map[string]bool{}
		all := append(append(n.traceEvents("cri.jsonl"), n.traceEvents("cni.jsonl")...), n.traceEvents("csi.jsonl")[:3]...)
		for _, ev := range all {
			if ev.Time.After(n.webRunning) {
				continue
			}
			switch ev.Method {
			case "ListPodSandbox", "ListContainers", "ContainerStatus", "PodSandboxStatus", "ImageFsInfo", "Status",
				"ListContainerStats", "ListPodSandboxStats", "ContainerStats", "ListImages", "ImageStatus", "Version", "RuntimeConfig":
				if seen[ev.Method] {
					continue
				}
				seen[ev.Method] = true
			}
			keep = append(keep, ev)
		}
		picked := n.path("kubelet-start.jsonl")
		for _, ev := range keep {
			if err := trace.AppendFile(picked, ev); err != nil {
				t.Fatal(err)
			}
		}
		svg := n.path("kubelet-start.svg")
		out, err := exec.Command(filepath.Join(n.bin, "harness"), "trace", "--title", "a real kubelet v1.37.2 starts on plugsim and runs the nginx static pod",
			"--svg", svg, picked).CombinedOutput()
		if err != nil {
			t.Fatalf("harness trace: %v\n%s", err, out)
		}
		t.Logf("the kubelet's start and the nginx pod, as the harness draws them:\n%s", out)
		if dir := os.Getenv("PLUGSIM_KUBELET_DOCS"); dir != "" {
			b, _ := os.ReadFile(svg)
			os.WriteFile(filepath.Join(dir, "kubelet-start.svg"), b, 0o644)
			os.WriteFile(filepath.Join(dir, "kubelet-start.txt"), out, 0o644)
		}

		// The kubelet's CRI calls up to that moment, every one of them (PLEG relists included), replay
		// against a fresh cri-fake with the same answers. Later parts of the trace name host paths
		// the kubelet has deleted since (the pods dirs of removed pods), so a replay of those cannot
		// be faithful on any runtime.
		startCRI := n.path("kubelet-start-cri.jsonl")
		calls := 0
		for _, ev := range n.traceEvents("cri.jsonl") {
			if !ev.Time.After(n.webRunning) {
				if err := trace.AppendFile(startCRI, ev); err != nil {
					t.Fatal(err)
				}
				calls++
			}
		}
		out, err = exec.Command(filepath.Join(n.bin, "harness"), "replay", "--run", "--interfaces", "CRI", startCRI).CombinedOutput()
		tail := string(out)
		if i := strings.LastIndex(tail, "\n\n"); i > 0 && len(tail)-i < 2000 {
			tail = tail[i:]
		} else if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		t.Logf("replaying the %d CRI calls the kubelet made until nginx ran, against a fresh cri-fake:%s", calls, tail)
		if err != nil {
			t.Fatalf("harness replay --run of the kubelet's trace: %v\n%s", err, tail)
		}
	})

	t.Run("init-and-probes", func(t *testing.T) {
		n.t = t
		n.addManifest("2-init-and-probes.yaml")
		n.waitPod("probes", 90*time.Second, func(p *corev1.Pod) bool {
			init, ok := containerStatus(p, "init")
			return ok && init.State.Terminated != nil && init.State.Terminated.ExitCode == 0 && podReady(p)
		})
		p, _ := n.pod("probes")
		for _, c := range []string{"app", "sidecar"} {
			cs, _ := containerStatus(p, c)
			if cs.State.Running == nil || !cs.Ready {
				t.Errorf("%s: %s", c, describe(p))
			}
			// The init container finished before this one started.
			init, _ := containerStatus(p, "init")
			if cs.State.Running != nil && cs.State.Running.StartedAt.Before(&init.State.Terminated.FinishedAt) {
				t.Errorf("%s started at %v, before init finished at %v", c, cs.State.Running.StartedAt, init.State.Terminated.FinishedAt)
			}
		}
		if c := countCalls(n.traceEvents("cri.jsonl"), trace.CRI, "ExecSync"); c == 0 {
			t.Error("no ExecSync in cri-fake's trace: the exec probes did not reach the runtime")
		} else {
			t.Logf("the probes ran as %d ExecSync calls", c)
		}
		// The init container's output, read from the log file the kubelet would serve.
		logs, _ := filepath.Glob(n.path("logs", "default_probes-node1_*", "init", "0.log"))
		if len(logs) != 1 {
			t.Fatalf("init container log: found %v", logs)
		}
		b, _ := os.ReadFile(logs[0])
		if !strings.Contains(string(b), " stdout F prepared") {
			t.Errorf("init log is not in CRI format with the container's output:\n%s", b)
		}
	})

	t.Run("crashloop", func(t *testing.T) {
		n.t = t
		n.addManifest("3-crashloop.yaml")
		n.waitPod("crasher", 120*time.Second, func(p *corev1.Pod) bool {
			cs, ok := containerStatus(p, "crash")
			return ok && cs.RestartCount >= 2 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
				cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 1
		})
	})

	t.Run("dropped-capability", func(t *testing.T) {
		n.t = t
		testDroppedCapability(t, n) // capabilities_e2e_test.go
	})

	t.Run("missing-image", func(t *testing.T) {
		n.t = t
		n.addManifest("4-missing-image.yaml")
		seen := map[string]bool{}
		n.waitPod("missing-image", 90*time.Second, func(p *corev1.Pod) bool {
			if cs, ok := containerStatus(p, "app"); ok && cs.State.Waiting != nil {
				seen[cs.State.Waiting.Reason] = true
			}
			return seen["ImagePullBackOff"]
		})
		if c := countCalls(n.traceEvents("cri.jsonl"), trace.CRI, "PullImage"); c == 0 {
			t.Error("no PullImage in cri-fake's trace")
		}
		t.Logf("waiting reasons seen: %v", seen)
	})

	t.Run("unknown-runtime-handler", func(t *testing.T) {
		n.t = t
		// 5-runtimeclass.yaml explains why this goes through crictl and not the kubelet.
		n.writeFile("gvisor-sandbox.json", []byte(`{"metadata": {"name": "gvisor", "namespace": "default", "uid": "gvisor-uid", "attempt": 0}, "log_directory": "`+n.path("logs", "gvisor")+`"}`))
		out, err := exec.Command("nsenter", "--net="+n.nsPath, "--", filepath.Join(n.bin, "crictl"),
			"--runtime-endpoint", "unix://"+n.path("cri.sock"), "runp", "--runtime", "gvisor", n.path("gvisor-sandbox.json")).CombinedOutput()
		if err == nil {
			t.Fatalf("RunPodSandbox with the unknown handler gvisor succeeded: %s", out)
		}
		// crictl prints the gRPC error inside its own quoted log message.
		if !strings.Contains(string(out), "InvalidArgument") || !strings.Contains(string(out), `no runtime for \"gvisor\" is configured`) {
			t.Errorf("the sandbox error does not name the handler: %s", out)
		}
		t.Logf("crictl runp --runtime gvisor:\n%s", strings.TrimSpace(string(out)))
	})

	t.Run("delete-manifest", func(t *testing.T) {
		n.t = t
		before := countCalls(n.traceEvents("cni.jsonl"), trace.CNI, "DEL")
		n.removeManifest("1-nginx-hostport.yaml")
		n.waitFor("the web pod to leave the kubelet", 90*time.Second, func() (bool, string) {
			p, ok := n.pod("web")
			if !ok {
				return true, ""
			}
			return false, describe(p)
		})
		n.waitFor("StopPodSandbox and CNI DEL", 60*time.Second, func() (bool, string) {
			cri := n.traceEvents("cri.jsonl")
			del := countCalls(n.traceEvents("cni.jsonl"), trace.CNI, "DEL")
			return countCalls(cri, trace.CRI, "StopContainer") > 0 && countCalls(cri, trace.CRI, "StopPodSandbox") > 0 && del > before,
				fmt.Sprintf("StopContainer=%d StopPodSandbox=%d CNI DEL %d→%d", countCalls(cri, trace.CRI, "StopContainer"), countCalls(cri, trace.CRI, "StopPodSandbox"), before, del)
		})
		out, _ := exec.Command("ip", "netns", "exec", n.name, "iptables", "-t", "nat", "-S").CombinedOutput()
		if strings.Contains(string(out), "--dport 8080") {
			t.Errorf("portmap's rule for 8080 is still there after CNI DEL:\n%s", out)
		}
	})

	t.Run("fifty-pods", func(t *testing.T) {
		n.t = t
		start := time.Now()
		for i := 0; i < 50; i++ {
			n.writeFile(fmt.Sprintf("manifests/many-%02d.yaml", i), []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: many-%02d, namespace: load}
spec:
  containers:
  - {name: app, image: busybox:1.36, command: ["sh", "-c", "while true; do sleep 10; done"]}
`, i)))
		}
		n.waitFor("50 pods Running", 5*time.Minute, func() (bool, string) {
			pods, err := n.pods()
			if err != nil {
				return false, err.Error()
			}
			running := 0
			for i := range pods {
				if pods[i].Namespace == "load" && pods[i].Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running == 50, fmt.Sprintf("%d of 50 Running", running)
		})
		t.Logf("50 static pods, manifests → all Running: %v", time.Since(start).Round(time.Millisecond))
		// cri-fake's CPU while the kubelet relists the 50 pods (PLEG, every second).
		cpu := func() time.Duration {
			pid := n.procs[0].cmd.Process.Pid // nsenter execs cri-fake in place: the same pid
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
			ut, _ := strconv.Atoi(f[11])
			st, _ := strconv.Atoi(f[12])
			return time.Duration(ut+st) * time.Second / 100 // USER_HZ
		}
		c0, t0 := cpu(), time.Now()
		time.Sleep(10 * time.Second)
		used, wall := cpu()-c0, time.Since(t0)
		t.Logf("cri-fake CPU while the kubelet relists 50 pods: %v in %v (%.1f%% of one core)", used, wall.Round(time.Millisecond), 100*used.Seconds()/wall.Seconds())
		for i := 0; i < 50; i++ {
			os.Remove(n.path(fmt.Sprintf("manifests/many-%02d.yaml", i)))
		}
	})

}
