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
	out := make([]*runtimeapi.Container, 0, len(cs))
	for _, c := range cs {
		if f.GetState() != nil && c.Status().State != f.GetState().GetState() {
			continue
		}
		out = append(out, toContainer(c))
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
