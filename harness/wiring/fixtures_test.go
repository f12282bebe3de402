package wiring

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/fixtures"
)

// A node started with the example fixtures holds them, with the READY pods networked by the CNI
// chain (cni-fake), whose ADDs the trace marks as the preload's.
func TestStartWithFixtures(t *testing.T) {
	fx, err := fixtures.Load("../../examples/fixtures/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := Start(t, Options{Fixtures: fx})
	ctx := context.Background()
	var adds []string
	for _, ev := range n.CRI.Recorder().Events() {
		if ev.Interface != "CNI" {
			t.Errorf("the preload recorded a %s %s event", ev.Interface, ev.Method)
			continue
		}
		if ev.Method != "ADD" || ev.Attrs["preload"] != "true" {
			t.Errorf("preload CNI event %s attrs %v", ev.Method, ev.Attrs)
		}
		adds = append(adds, ev.Attrs["pod"])
	}
	if len(adds) != 1 || adds[0] != "shop/web" {
		t.Errorf("CNI ADDs for %v, want one, for the READY pod that is not host-network", adds)
	}
	pods, err := n.RuntimeClient.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("ListPodSandbox: %v %v", pods, err)
	}
	st, err := n.RuntimeClient.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "web-7c9f"})
	if err != nil || st.Status.Network.GetIp() == "" {
		t.Fatalf("the READY pod has no address from the CNI chain: %v %v", st, err)
	}
	ctrs, err := n.RuntimeClient.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != 5 {
		t.Fatalf("ListContainers: %v %v", ctrs, err)
	}
	vols, err := n.ControllerClient.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(vols.Entries) != 3 || vols.Entries[0].Status.PublishedNodeIds[0] != "plugsim-node" {
		t.Fatalf("ListVolumes: %v %v", vols, err)
	}

	if _, err := StartNode(Options{Dir: t.TempDir(), CNI: "off", NoCSI: true, Fixtures: fx}); err == nil {
		t.Error("NoCSI with CSI fixtures started")
	}
}
