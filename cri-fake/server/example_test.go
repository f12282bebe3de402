package server_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/faults"
)

// The zero Options serve cri-fake on a socket in a fresh temporary directory, with CNI off and
// the built-in image catalog; Close removes it.
func ExampleStart() {
	srv, err := server.Start(server.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	images := runtimeapi.NewImageServiceClient(conn)

	srv.Faults().Add(faults.Rule{Method: "PullImage", Code: "Unavailable", Message: "registry is down", Times: 1})
	pull := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}
	for range 2 {
		_, err := images.PullImage(context.Background(), pull)
		fmt.Println(status.Code(err))
	}
	for _, ev := range srv.Recorder().Events() {
		if ev.Error != "" {
			fmt.Printf("%s %s %q\n", ev.Method, ev.Code, ev.Error)
		} else {
			fmt.Printf("%s %s %s\n", ev.Method, ev.Code, ev.Response)
		}
	}
	// Output:
	// Unavailable
	// OK
	// PullImage Unavailable "registry is down"
	// PullImage OK {"imageRef":"sha256:c0a5cba1f8fcfc10fe7106ff86e8681dbf9c97f8c52cbfd38abb42929fad920b"}
}
