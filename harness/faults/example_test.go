package faults_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/faults"
)

// The rules cri-fake applies: a set that knows the CRI methods, a rule on one image, and the
// status the client gets back.
func Example() {
	set := faults.NewSet(0, faults.WithMethods(faults.MethodsOf(&runtimeapi.ImageService_ServiceDesc)...), faults.WithGRPCCodes())
	ids, err := set.Add(faults.Rule{Method: "PullImage", Match: map[string]string{"image.image": "*nginx*"}, Code: "Unavailable", Message: "registry down", Times: 1})
	if err != nil {
		panic(err)
	}
	for _, img := range []string{"busybox", "nginx:1.27", "nginx:1.27"} {
		rule, err := set.Inject(context.Background(), "/runtime.v1.ImageService/PullImage", &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
		fmt.Printf("%s: rule %q, %v\n", img, rule, status.Code(err))
	}
	r, _ := set.Rule(ids[0])
	fmt.Println("hits:", r.Hits)
	// Output:
	// busybox: rule "", OK
	// nginx:1.27: rule "rule-1", Unavailable
	// nginx:1.27: rule "", OK
	// hits: 1
}
