package runtime

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestListContainers(t *testing.T) {
	s := newService(t)
	p1 := runPod(t, s, "p1")
	p2 := runPod(t, s, "p2")
	a := createContainer(t, s, p1, "a")
	b := createContainer(t, s, p1, "b")
	c := createContainer(t, s, p2, "c")
	startContainer(t, s, b)
	startContainer(t, s, c)
	if _, err := s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	state := func(st runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: st}
	}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, []string{a, b, c}},
		{"by id", &runtimeapi.ContainerFilter{Id: b}, []string{b}},
		{"by id prefix", &runtimeapi.ContainerFilter{Id: a[:9]}, []string{a}},
		{"by sandbox", &runtimeapi.ContainerFilter{PodSandboxId: p1}, []string{a, b}},
		{"by sandbox prefix", &runtimeapi.ContainerFilter{PodSandboxId: p2[:7]}, []string{c}},
		{"id in other sandbox", &runtimeapi.ContainerFilter{Id: a, PodSandboxId: p2}, nil},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{a}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{b}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{c}},
		{"label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"container": "b"}}, []string{b}},
		{"label mismatch", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"container": "zz"}}, nil},
		{"unknown id", &runtimeapi.ContainerFilter{Id: "zzz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.Containers {
				got = append(got, c.Id)
				if c.Metadata == nil || c.Image == nil || c.ImageRef == "" || c.ImageId == "" || c.CreatedAt == 0 || c.PodSandboxId == "" {
					t.Errorf("incomplete item %v", c)
				}
			}
			if !equalIDs(got, tc.want) {
				t.Fatalf("got %v, want %v", short(got), short(tc.want))
			}
		})
	}
}
