package clients

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/harness/wiring"
)

// CreateVolume times out once: the provisioner retries, and since CreateVolume is idempotent for
// the same name, provisioning the same claim again (a provisioner restart) yields the same volume.
func TestProvisionRetriesATimeoutIdempotently(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off"})
	if _, err := node.CSI.Faults().Add(faults.Rule{Method: "CreateVolume", Code: "DeadlineExceeded", Times: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vol, err := Provision(ctx, node.ControllerClient, "pvc-1234", 1<<30, 3)
	if err != nil {
		t.Fatal(err)
	}
	if vol.CapacityBytes < 1<<30 {
		t.Errorf("capacity %d, want at least 1Gi", vol.CapacityBytes)
	}
	if got := calls(node.CSI.Recorder().Events(), trace.CSI); !slices.Equal(got, []string{"CreateVolume:DeadlineExceeded", "CreateVolume:OK"}) {
		t.Errorf("calls %v", got)
	}
	again, err := Provision(ctx, node.ControllerClient, "pvc-1234", 1<<30, 3)
	if err != nil {
		t.Fatal(err)
	}
	if again.VolumeId != vol.VolumeId {
		t.Errorf("the same claim got volume %s, then %s", vol.VolumeId, again.VolumeId)
	}
	list, err := node.ControllerClient.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Entries) != 1 {
		t.Errorf("%d volumes exist, want 1", len(list.Entries))
	}
}

// A final error (InvalidArgument) is not retried.
func TestProvisionStopsOnAFinalError(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off"})
	node.CSI.Faults().Add(faults.Rule{Method: "CreateVolume", Match: map[string]string{"name": "pvc-bad*"}, Code: "InvalidArgument", Message: "unsupported parameter"})
	if _, err := Provision(context.Background(), node.ControllerClient, "pvc-bad", 1<<30, 3); err == nil {
		t.Fatal("Provision succeeded")
	}
	if got := calls(node.CSI.Recorder().Events(), trace.CSI); !slices.Equal(got, []string{"CreateVolume:InvalidArgument"}) {
		t.Errorf("calls %v, want a single CreateVolume", got)
	}
}
