package runtime

import (
	"context"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// ListPodSandbox lists sandboxes, filtered by ID (full or prefix), state and label selector (every
// selector label must be present with that value), in creation order.
func (s *Service) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: s.listSandboxes(req.GetFilter())}, nil
}

// StreamPodSandboxes sends the ListPodSandbox result as one message (KEP-5825).
func (s *Service) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream runtimeapi.RuntimeService_StreamPodSandboxesServer) error {
	return stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: s.listSandboxes(req.GetFilter())})
}

func (s *Service) listSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	if id := f.GetId(); id != "" {
		sb, err := s.sandboxes.Get(id)
		if err != nil {
			return nil
		}
		p := make([]runtimeapi.PodSandbox, 1)
		fillSandbox(&p[0], sb)
		if matchSandbox(&p[0], f) {
			return []*runtimeapi.PodSandbox{&p[0]}
		}
		return nil
	}
	var all []*store.Sandbox
	if uid, ok := f.GetLabelSelector()[store.PodUIDLabel]; ok {
		all = s.sandboxes.InPod(uid) // the kubelet's GetPodStatus query, answered from an index
	} else {
		all = s.sandboxes.List()
	}
	// One allocation for all the answer's messages (see listContainers).
	msgs := make([]runtimeapi.PodSandbox, len(all))
	out := make([]*runtimeapi.PodSandbox, 0, len(all))
	for i, sb := range all {
		if f.GetState() != nil && sb.Status().State != f.GetState().GetState() {
			continue
		}
		if !labelsMatch(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		fillSandbox(&msgs[i], sb)
		out = append(out, &msgs[i])
	}
	return out
}

// fillSandbox writes sb as a listing shows it into m.
func fillSandbox(m *runtimeapi.PodSandbox, sb *store.Sandbox) {
	m.Id, m.Metadata, m.State, m.CreatedAt = sb.ID, sb.Config.GetMetadata(), sb.Status().State, sb.CreatedAt
	m.Labels, m.Annotations, m.RuntimeHandler = sb.Config.GetLabels(), sb.Config.GetAnnotations(), sb.RuntimeHandler
}

func matchSandbox(p *runtimeapi.PodSandbox, f *runtimeapi.PodSandboxFilter) bool {
	if f.GetState() != nil && p.State != f.GetState().GetState() {
		return false
	}
	return labelsMatch(p.Labels, f.GetLabelSelector())
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// idMatches reports whether id is want or starts with it.
func idMatches(id, want string) bool { return want == "" || strings.HasPrefix(id, want) }
