package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// ListContainers lists containers filtered by ID (full or prefix), sandbox ID (full or prefix),
// state and label selector, in creation order.
func (s *Service) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: s.listContainers(req.GetFilter())}, nil
}

// StreamContainers sends the ListContainers result as one message (KEP-5825).
func (s *Service) StreamContainers(req *runtimeapi.StreamContainersRequest, stream runtimeapi.RuntimeService_StreamContainersServer) error {
	return stream.Send(&runtimeapi.StreamContainersResponse{Containers: s.listContainers(req.GetFilter())})
}

func (s *Service) listContainers(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	cs := s.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector())
	// The answer's messages are allocated together, two slices for all of them rather than two
	// objects per container: the kubelet lists every container every second, and at 30,000 that
	// was 60,000 allocations a call for the garbage collector to find again (BenchmarkLargeNode).
	// Nothing keeps them past the call but gRPC's encoding and the trace, which copies what it keeps
	// (harness/trace's list prefix).
	msgs := make([]runtimeapi.Container, len(cs))
	specs := make([]runtimeapi.ImageSpec, len(cs))
	out := make([]*runtimeapi.Container, 0, len(cs))
	for i, c := range cs {
		st := c.Status()
		if f.GetState() != nil && st.State != f.GetState().GetState() {
			continue
		}
		m, img := &msgs[i], &specs[i]
		img.Image, img.UserSpecifiedImage = c.ImageName, c.Config.GetImage().GetUserSpecifiedImage()
		m.Id, m.PodSandboxId, m.Metadata, m.Image = c.ID, c.SandboxID, c.Config.GetMetadata(), img
		m.ImageRef, m.ImageId, m.State, m.CreatedAt = c.ImageID, c.ImageID, st.State, c.CreatedAt
		m.Labels, m.Annotations = c.Config.GetLabels(), c.Config.GetAnnotations()
		out = append(out, m)
	}
	return out
}

// filterContainers applies the ID, sandbox and label filters shared by ListContainers and
// ListContainerStats.
func (s *Service) filterContainers(id, sandboxID string, selector map[string]string) []*store.Container {
	var cs []*store.Container
	switch {
	case id != "":
		c, err := s.containers.Get(id)
		if err != nil {
			return nil
		}
		cs = []*store.Container{c}
	case sandboxID != "":
		sb, err := s.sandboxes.Get(sandboxID)
		if err != nil {
			return nil
		}
		cs = s.containers.InSandbox(sb.ID)
	default:
		if uid, ok := selector[store.PodUIDLabel]; ok {
			cs = s.containers.InPod(uid) // the kubelet's GetPodStatus query
			break
		}
		cs = s.containers.List()
	}
	out := cs[:0:0]
	for _, c := range cs {
		if sandboxID != "" && !idMatches(c.SandboxID, sandboxID) {
			continue
		}
		if !labelsMatch(c.Config.GetLabels(), selector) {
			continue
		}
		out = append(out, c)
	}
	return out
}
