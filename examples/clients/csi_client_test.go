package clients

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/harness/wiring"
)

// CreateVolume hangs once, longer than the provisioner waits: the attempt ends with the
// provisioner's deadline (DeadlineExceeded, at the caller and in the trace), the provisioner
// retries, and since CreateVolume is idempotent for the same name, provisioning the same claim
// again (a provisioner restart) yields the same volume.
func TestProvisionRetriesATimeoutIdempotently(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off"})
	if _, err := node.CSI.Faults().Add(faults.Rule{Method: "CreateVolume", Delay: faults.Duration(time.Minute), Times: 1}); err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := node.CSI.Recorder().Subscribe(16)
	t.Cleanup(unsubscribe)
	ctx := context.Background()
	vol, err := Provision(ctx, node.ControllerClient, "pvc-1234", 1<<30, 3, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if vol.CapacityBytes < 1<<30 {
		t.Errorf("capacity %d, want at least 1Gi", vol.CapacityBytes)
	}
	// The cut attempt is recorded when its handler returns, which may be after the retry.
	got := []string{nextEvent(t, events, "CreateVolume").Code, nextEvent(t, events, "CreateVolume").Code}
	slices.Sort(got)
	if !slices.Equal(got, []string{"DeadlineExceeded", "OK"}) {
		t.Errorf("CreateVolume codes %v, want one DeadlineExceeded and one OK", got)
	}
	again, err := Provision(ctx, node.ControllerClient, "pvc-1234", 1<<30, 3, 300*time.Millisecond)
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

// A final error (InvalidArgument) is not retried, and a rule matching on the request's name
// leaves other claims alone.
func TestProvisionStopsOnAFinalError(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off"})
	if _, err := node.CSI.Faults().Add(faults.Rule{Method: "CreateVolume", Match: map[string]string{"name": "pvc-bad*"}, Code: "InvalidArgument", Message: "unsupported parameter"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(context.Background(), node.ControllerClient, "pvc-bad", 1<<30, 3, 5*time.Second); err == nil {
		t.Fatal("Provision succeeded")
	}
	if _, err := Provision(context.Background(), node.ControllerClient, "pvc-good", 1<<30, 3, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := calls(node.CSI.Recorder().Events(), trace.CSI); !slices.Equal(got, []string{"CreateVolume:InvalidArgument", "CreateVolume:OK"}) {
		t.Errorf("calls %v, want a single CreateVolume per claim", got)
	}
}
