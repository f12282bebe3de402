package wiring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
)

const podScenario = `name: pod through the wired node
steps:
  - interface: cri
    call: Status
    expect:
      fields:
        status.conditions[type=NetworkReady].status: true
  - interface: cri
    call: RunPodSandbox
    request:
      config:
        metadata: {name: web, namespace: default, uid: "${run}"}
        portMappings: [{containerPort: 80, hostPort: 8080}]
    capture: {sandbox: podSandboxId}
    expect:
      trace:
        - interface: CNI
          method: ADD
          callee: cni-fake
          fields:
            request.capabilityArgs.portMappings[0].hostPort: 8080
  - interface: cri
    call: PodSandboxStatus
    request: {podSandboxId: "${sandbox}"}
    expect:
      fields:
        status.network.ip: {matches: "^10\\.88\\."}
  - interface: csi
    call: NodeGetInfo
    expect:
      fields:
        nodeId: ${nodeId}
  - interface: csi
    call: CreateVolume
    request:
      name: pvc-1
      volumeCapabilities: [{mount: {}, accessMode: {mode: SINGLE_NODE_WRITER}}]
    expect:
      trace:
        - {interface: CSI, method: CreateVolume, caller: external-provisioner, callee: "csi-fake (controller)"}
  - interface: cri
    call: StopPodSandbox
    request: {podSandboxId: "${sandbox}"}
    expect:
      trace:
        - {interface: CNI, method: DEL}
`

// By default cni-fake runs in-process: nothing is installed, and the trace reads as with the
// binary (TestExecCNIInstallsTheBinary runs the same scenario with it).
func TestStartWiresTheFakes(t *testing.T) {
	n := Start(t, Options{})
	for _, f := range []string{"crictl.yaml", "etc/cni/net.d/10-plugsim.conflist"} {
		if _, err := os.Stat(filepath.Join(n.Dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if entries, _ := os.ReadDir(n.CNIBinDir); len(entries) != 0 {
		t.Errorf("the CNI bin dir has %d entries; with cni-fake in-process it should be empty", len(entries))
	}
	runPodScenario(t, n)
}

func TestExecCNIInstallsTheBinary(t *testing.T) {
	n := Start(t, Options{ExecCNI: true})
	if fi, err := os.Stat(filepath.Join(n.CNIBinDir, "cni-fake")); err != nil || fi.IsDir() {
		t.Fatalf("cni-fake is not installed: %v", err)
	}
	runPodScenario(t, n)
}

func runPodScenario(t *testing.T, n *Node) {
	t.Helper()
	sc, err := scenario.Parse([]byte(podScenario), "wired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := n.Env()
	var out bytes.Buffer
	env.Out = &out
	res := scenario.Run(context.Background(), sc, env)
	if !res.Passed {
		t.Fatalf("%s\n%s", res.Failure, out.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"kubelet ──CRI──▶ cri-fake  RunPodSandbox",
		"cri-fake ──CNI ADD──▶ cni-fake  network=plugsim pod=default/web",
		"external-provisioner ──CSI──▶ csi-fake (controller)  CreateVolume",
		"kubelet ──CSI──▶ csi-fake (node)  NodeGetInfo",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("trace lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "──CNI ADD──▶ cni-fake  network=plugsim container=") {
		t.Errorf("cni-fake's own log line was not folded into the chain event:\n%s", out.String())
	}
}

func TestNoCNIConfigMeansNetworkNotReady(t *testing.T) {
	n := Start(t, Options{CNI: "none", NoCSI: true})
	sc, err := scenario.Parse([]byte(`steps:
  - interface: cri
    call: Status
    expect:
      fields:
        status.conditions[type=NetworkReady].status: false
        status.conditions[type=NetworkReady].message: {contains: cni plugin not initialized}
`), "nocni.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res := scenario.Run(context.Background(), sc, n.Env()); !res.Passed {
		t.Fatal(res.Failure)
	}
}

const cniScenario = `name: CNI by hand
steps:
  - interface: cni
    call: ADD
    request:
      containerID: "c-${run}"
      netns: /var/run/netns/fake-${run}
      ifName: eth0
      args: {IgnoreUnknown: "1", K8S_POD_NAME: web, K8S_POD_NAMESPACE: default}
    capture: {ip: "ips[0].address"}
    expect:
      fields:
        cniVersion: 1.1.0
        ips[0].address: {matches: '^10\.88\.\d+\.\d+/16$'}
      trace:
        - {interface: CNI, method: ADD, caller: harness, callee: cni-fake}
  - interface: cni
    call: CHECK
    request: {containerID: "c-${run}", netns: "/var/run/netns/fake-${run}", ifName: eth0}
  - interface: cni
    call: DEL
    request: {containerID: "c-${run}", netns: "/var/run/netns/fake-${run}", ifName: eth0}
  - name: DEL is safe to repeat
    interface: cni
    call: DEL
    request: {containerID: "c-${run}", netns: "/var/run/netns/fake-${run}", ifName: eth0}
  - interface: cni
    call: STATUS
`

func TestCNIStepsDriveTheChainThroughLibcni(t *testing.T) {
	n := Start(t, Options{NoCSI: true})
	sc, err := scenario.Parse([]byte(cniScenario), "cni.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := n.Env()
	var out bytes.Buffer
	env.Out = &out
	if res := scenario.Run(context.Background(), sc, env); !res.Passed {
		t.Fatalf("%s\n%s", res.Failure, out.String())
	}
	if !strings.Contains(out.String(), "harness ──CNI ADD──▶ cni-fake  network=plugsim") || strings.Contains(out.String(), "cri-fake ──CNI") {
		t.Errorf("each CNI call should show once, made by the harness:\n%s", out.String())
	}
}

// A runtime author's test: the third pod's CNI ADD fails with "no IP addresses available", and
// RunPodSandbox says so; the rule's count and the trace show it.
func TestCNIFaultFailsTheThirdPod(t *testing.T) {
	for _, execCNI := range []bool{false, true} {
		t.Run(fmt.Sprintf("exec=%v", execCNI), func(t *testing.T) {
			n := Start(t, Options{NoCSI: true, ExecCNI: execCNI})
			ids, err := n.CNIFaults().Add(faults.Rule{Method: "ADD", Code: "11", Message: "no IP addresses available in range set 10.88.0.1-10.88.255.254", After: 2, Times: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := 1; i <= 4; i++ {
				_, err := n.RuntimeClient.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
					Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("web-%d", i), Namespace: "default", Uid: fmt.Sprintf("u%d", i)},
				}})
				if i == 3 {
					if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), `plugin type="cni-fake" failed (add): no IP addresses available in range set`) {
						t.Fatalf("pod 3: %v", err)
					}
				} else if err != nil {
					t.Fatalf("pod %d: %v", i, err)
				}
			}
			rs, err := n.CNIFaults().Rules()
			if err != nil || len(rs) != 1 || rs[0].ID != ids[0] || rs[0].Hits != 1 || rs[0].Matched != 3 {
				t.Fatalf("rules: %+v, %v", rs, err)
			}
			evs, err := trace.ReadFile(n.CNILog)
			if err != nil {
				t.Fatal(err)
			}
			var faulted []string
			for _, ev := range evs {
				if ev.Attrs["fault"] != "" {
					faulted = append(faulted, ev.Method+" "+ev.Code+" "+ev.Attrs["pod"]+" "+ev.Attrs["fault"])
				}
			}
			if len(faulted) != 1 || faulted[0] != "ADD 11 default/web-3 "+ids[0] {
				t.Fatalf("cni-fake's trace lines with a fault: %q", faulted)
			}
		})
	}
}

const cniFaultScenario = `name: CNI fault from a scenario
steps:
  - interface: fault
    call: Add
    target: cni
    request: {verb: ADD, code: 11, message: "pool exhausted", times: 1}
  - interface: cri
    call: RunPodSandbox
    request:
      config:
        metadata: {name: web, namespace: default, uid: "${run}"}
    expect:
      code: Unknown
      error: pool exhausted
  - interface: cri
    call: RunPodSandbox
    request:
      config:
        metadata: {name: web, namespace: default, uid: "${run}"}
`

func TestScenarioAddsCNIFaults(t *testing.T) {
	n := Start(t, Options{NoCSI: true})
	sc, err := scenario.Parse([]byte(cniFaultScenario), "cnifault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := n.Env()
	var out bytes.Buffer
	env.Out = &out
	if res := scenario.Run(context.Background(), sc, env); !res.Passed {
		t.Fatalf("%s\n%s", res.Failure, out.String())
	}
}
