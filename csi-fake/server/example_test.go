package server_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plugsim/plugsim/csi-fake/server"
)

// The zero Options serve every CSI service on a socket in a fresh temporary directory, with the
// state in memory; Close removes it. CreateVolume is idempotent for the same name. Without a Caller in the
// request's metadata (trace.CallerMetadata) the trace names the controller service's usual caller.
func ExampleStart() {
	srv, err := server.Start(server.Options{NodeID: "node-1"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ctrl := csi.NewControllerClient(conn)

	req := &csi.CreateVolumeRequest{
		Name:          "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	a, err := ctrl.CreateVolume(context.Background(), req)
	if err != nil {
		panic(err)
	}
	b, err := ctrl.CreateVolume(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Volume.CapacityBytes, a.Volume.VolumeId == b.Volume.VolumeId)
	_, err = ctrl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{})
	fmt.Println(err)
	for _, ev := range srv.Recorder().Events() {
		fmt.Println(ev.Caller, "→", ev.Callee, ev.Method, ev.Code)
	}
	// Output:
	// 1073741824 true
	// rpc error: code = InvalidArgument desc = volume_id is required
	// csi-controller → csi-fake CreateVolume OK
	// csi-controller → csi-fake CreateVolume OK
	// csi-controller → csi-fake DeleteVolume InvalidArgument
}
