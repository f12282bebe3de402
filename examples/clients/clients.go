// Package clients holds three small CRI and CSI clients, of the kind a test author writes (an
// image manager, a monitoring agent, a CSI provisioner), and tests that show how to unit-test such
// clients with plugsim: start the fakes in-process, make the next calls fail or slow down with a
// fault rule, run the client, and assert on the calls the fake recorded.
//
// It is a Go module of its own that requires plugsim through a replace directive only, as a test
// author's module would: what it uses is plugsim's public API, and `make test` proves it compiles
// and passes from outside.
package clients

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// EnsureImage makes sure an image is present, the way the kubelet's image manager does:
// ImageStatus first, PullImage only when absent, and a transient registry error (Unavailable)
// retried up to attempts times with a back-off. It returns the image ID.
func EnsureImage(ctx context.Context, img runtimeapi.ImageServiceClient, ref string, attempts int, backoff time.Duration) (string, error) {
	st, err := img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return "", fmt.Errorf("image status %s: %w", ref, err)
	}
	if st.Image != nil {
		return st.Image.Id, nil
	}
	for i := 1; ; i++ {
		resp, err := img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err == nil {
			return resp.ImageRef, nil
		}
		if status.Code(err) != codes.Unavailable || i >= attempts {
			return "", fmt.Errorf("pull %s (attempt %d): %w", ref, i, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// RunningContainers counts the running containers per pod UID, the way a monitoring agent reads
// the runtime: one ListContainers with a state filter.
func RunningContainers(ctx context.Context, rt runtimeapi.RuntimeServiceClient) (map[string]int, error) {
	resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range resp.Containers {
		out[c.Labels["io.kubernetes.pod.uid"]]++
	}
	return out, nil
}

// Provision creates a volume the way the external-provisioner does: CreateVolume with the
// PVC-derived name, each attempt bounded by timeout (the provisioner's --timeout), and on a timeout
// (DeadlineExceeded) or Unavailable the same call again, relying on CreateVolume being idempotent
// for the same name and parameters (CSI spec).
func Provision(ctx context.Context, ctrl csi.ControllerClient, name string, size int64, attempts int, timeout time.Duration) (*csi.Volume, error) {
	req := &csi.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	for i := 1; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := ctrl.CreateVolume(cctx, req)
		cancel()
		if err == nil {
			return resp.Volume, nil
		}
		c := status.Code(err)
		if (c != codes.DeadlineExceeded && c != codes.Unavailable) || i >= attempts {
			return nil, fmt.Errorf("create volume %s (attempt %d): %w", name, i, err)
		}
	}
}
