package wiring_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/wiring"
)

// StartNode brings cri-fake and csi-fake up in-process with clients connected; a Go test would
// call wiring.Start(t, opts), which does the same and stops the node with t.Cleanup. CNI "off"
// leaves the CNI chain out (cri-fake hands out the pod addresses itself).
func ExampleStartNode() {
	node, err := wiring.StartNode(wiring.Options{CNI: "off"})
	if err != nil {
		panic(err)
	}
	defer node.Close()

	ctx := context.Background()
	v, err := node.RuntimeClient.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		panic(err)
	}
	info, err := node.NodeClient.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.RuntimeName, info.NodeId)
	for _, ev := range append(node.CRI.Recorder().Events(), node.CSI.Recorder().Events()...) {
		fmt.Println(ev.Interface, ev.Caller, "→", ev.Callee, ev.Method, ev.Code)
	}
	// Output:
	// cri-fake plugsim-node
	// CRI kubelet → cri-fake Version OK
	// CSI kubelet → csi-fake NodeGetInfo OK
}
