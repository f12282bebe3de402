package admin_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/wiring"
)

// The admin socket serves a running fake's fault rules and trace to another process (`harness
// run --dir`, curl, a test driving a fake it did not start); Client is its Go side.
func ExampleClient() {
	node, err := wiring.StartNode(wiring.Options{CNI: "off", NoCSI: true, Admin: true})
	if err != nil {
		panic(err)
	}
	defer node.Close()

	adm, err := admin.NewClient(node.CRIAdmin)
	if err != nil {
		panic(err)
	}
	ids, err := adm.AddFaults(faults.Rule{ID: "registry-outage", Method: "PullImage", Code: "Unavailable", Times: 1})
	fmt.Println(ids, err)

	pull := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}
	for range 2 {
		_, err := node.ImageClient.PullImage(context.Background(), pull)
		fmt.Println(status.Code(err))
	}
	evs, err := adm.Trace(0)
	if err != nil {
		panic(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Seq, ev.Method, ev.Code, ev.Error)
	}
	// Output:
	// [registry-outage] <nil>
	// Unavailable
	// OK
	// 1 PullImage Unavailable injected fault registry-outage on PullImage
	// 2 PullImage OK
}
