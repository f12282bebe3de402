package faults_test

import (
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/faults"
)

// A rule applies to the calls of its method whose request fields match, for its next Times calls.
// The fakes run Check on every call (their interceptor does); here it is called by hand.
func ExampleSet() {
	set := faults.NewSet(1)
	ids, err := set.Add(faults.Rule{
		Method:  "PullImage",
		Match:   map[string]string{"image.image": "*nginx*"},
		Code:    "Unavailable",
		Message: "registry is down",
		Times:   2,
	})
	fmt.Println(ids, err)
	for _, image := range []string{"busybox", "nginx:1.29", "nginx:1.29", "nginx:1.29"} {
		req := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}
		f, applies := set.Check("/runtime.v1.ImageService/PullImage", faults.ProtoFields(req))
		fmt.Println(image, applies, f.GRPCError())
	}
	// Output:
	// [rule-1] <nil>
	// busybox false <nil>
	// nginx:1.29 true rpc error: code = Unavailable desc = registry is down
	// nginx:1.29 true rpc error: code = Unavailable desc = registry is down
	// nginx:1.29 false <nil>
}

// A --faults file holds the same rules in YAML (or JSON); a rule with a delay and no code slows
// the call down and lets it through.
func ExampleParseFile() {
	f, err := faults.ParseFile([]byte(`
rules:
- method: PullImage
  match: {image.image: "*nginx*"}
  code: Unavailable
  times: 2
- method: StopContainer
  delay: 3s
`), "faults.yaml")
	if err != nil {
		panic(err)
	}
	for _, r := range f.Rules {
		fmt.Printf("%s code=%q delay=%v times=%d\n", r.Method, r.Code, time.Duration(r.Delay), r.Times)
	}
	_, err = faults.ParseFile([]byte("rules: [{method: PullImage, code: Unavailabel}]"), "typo.yaml")
	fmt.Println(err)
	// Output:
	// PullImage code="Unavailable" delay=0s times=2
	// StopContainer code="" delay=3s times=0
	// typo.yaml: rules[0]: fault rule "" for PullImage: code "Unavailabel" is neither a gRPC code name nor a CNI error number
}
