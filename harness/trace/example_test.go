package trace_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

// A Recorder keeps the newest events in order, each with its sequence number.
func ExampleRecorder() {
	rec, err := trace.New(trace.Options{Capacity: 100})
	if err != nil {
		panic(err)
	}
	rec.Record(trace.Event{Interface: trace.CRI, Caller: "kubelet", Callee: "cri-fake", Method: "RunPodSandbox", Code: "OK"})
	rec.Record(trace.Event{Interface: trace.CNI, Caller: "cri-fake", Callee: "plugsim", Method: "ADD", Code: "OK"})
	for _, ev := range rec.Events() {
		fmt.Println(ev.Seq, ev.Caller, "→", ev.Callee, ev.Interface, ev.Method, ev.Code)
	}
	// Output:
	// 1 kubelet → cri-fake CRI RunPodSandbox OK
	// 2 cri-fake → plugsim CNI ADD OK
}

type versionOnly struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
}

func (versionOnly) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "mine"}, nil
}

// The interceptor records every call a gRPC server serves, with its code and the request and
// response as JSON, registry credentials redacted: put it in front of a server of your own.
func ExampleRecorder_UnaryServerInterceptor() {
	rec, _ := trace.New(trace.Options{})
	srv := grpc.NewServer(grpc.UnaryInterceptor(rec.UnaryServerInterceptor(trace.Boundary{Interface: trace.CRI, Caller: "kubelet", Callee: "mine"})))
	runtimeapi.RegisterRuntimeServiceServer(srv, versionOnly{})
	runtimeapi.RegisterImageServiceServer(srv, versionOnly{})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, _ := grpc.NewClient("passthrough:///mine",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()

	ctx := context.Background()
	runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: "nginx"}, Auth: &runtimeapi.AuthConfig{Username: "me", Password: "hunter2"}})
	for _, ev := range rec.Events() {
		fmt.Println(ev.Method, ev.Code, string(ev.Request), string(ev.Response))
	}
	// Output:
	// Version OK {"version":"v1"} {"runtimeName":"mine"}
	// PullImage Unimplemented {"image":{"image":"nginx"},"auth":{"username":"me","password":"***stripped***"}}
}
