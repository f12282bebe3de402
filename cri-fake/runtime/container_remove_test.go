package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRemoveContainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Service, id string)
	}{
		{"created", func(*testing.T, *Service, string) {}},
		{"running", func(t *testing.T, s *Service, id string) { startContainer(t, s, id) }},
		{"stopped", func(t *testing.T, s *Service, id string) {
			startContainer(t, s, id)
			if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t)
			pod := runPod(t, s, "p")
			id := createContainer(t, s, pod, "c")
			tc.setup(t, s, id)
			for range 2 {
				if _, err := s.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
			wantCode(t, err, codes.NotFound)
			// The name is free again.
			createContainer(t, s, pod, "c")
		})
	}
}
