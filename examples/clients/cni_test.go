package clients

import (
	"context"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/harness/wiring"
)

// With the default wiring, a pod's network goes through the cni-fake chain the way containerd
// runs it: the trace shows the runtime's CNI ADD and DEL beside the CRI calls, and the pod gets an
// address from the conflist's subnet.
func TestPodNetworkThroughTheCNIChain(t *testing.T) {
	node := wiring.Start(t, wiring.Options{NoCSI: true})
	ctx := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"}}
	sb, err := node.RuntimeClient.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	st, err := node.RuntimeClient.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil {
		t.Fatal(err)
	}
	if ip := st.GetStatus().GetNetwork().GetIp(); !strings.HasPrefix(ip, "10.88.") {
		t.Errorf("pod IP %q, want one from 10.88.0.0/16", ip)
	}
	if _, err := node.RuntimeClient.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	var cni []string
	for _, ev := range node.CRI.Recorder().Events() {
		if ev.Interface == trace.CNI {
			cni = append(cni, ev.Caller+" "+ev.Method+":"+ev.Code+" "+ev.Attrs["pod"])
		}
	}
	if want := []string{"cri-fake ADD:OK default/web", "cri-fake DEL:OK default/web"}; strings.Join(cni, ",") != strings.Join(want, ",") {
		t.Errorf("CNI calls %q, want %q", cni, want)
	}
}

// CNI fault rules (a cni-fake rule making ADD fail with "no IP addresses available" on the third
// call) go here once cni-fake takes them (issue 13, item 7).
