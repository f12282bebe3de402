package runtime

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestListPodSandbox(t *testing.T) {
	s := newService(t)
	a := runPod(t, s, "a")
	b := runPod(t, s, "b")
	c := runPod(t, s, "c")
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: b}); err != nil {
		t.Fatal(err)
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"all", nil, []string{a, b, c}},
		{"by id", &runtimeapi.PodSandboxFilter{Id: b}, []string{b}},
		{"by id prefix", &runtimeapi.PodSandboxFilter{Id: c[:10]}, []string{c}},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "zzz"}, nil},
		{"ready", &runtimeapi.PodSandboxFilter{State: ready}, []string{a, c}},
		{"not ready", &runtimeapi.PodSandboxFilter{State: notReady}, []string{b}},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "a"}}, []string{a}},
		{"pod uid label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-c"}}, []string{c}},
		{"label mismatch", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "zz"}}, nil},
		{"id and wrong state", &runtimeapi.PodSandboxFilter{Id: a, State: notReady}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range resp.Items {
				got = append(got, p.Id)
				if p.Metadata == nil || p.CreatedAt == 0 || p.Labels == nil {
					t.Errorf("incomplete item %v", p)
				}
			}
			if !equalIDs(got, tc.want) {
				t.Fatalf("got %v, want %v", short(got), short(tc.want))
			}
		})
	}
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func short(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id[:min(8, len(id))]
	}
	return out
}
