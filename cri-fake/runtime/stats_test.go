package runtime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestContainerStatsGrow(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := newService(t, func(o *Options) { o.Now = func() time.Time { return now } })
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")

	get := func() *runtimeapi.ContainerStats {
		t.Helper()
		resp, err := s.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Stats
		if st.Attributes.GetId() != id || st.Attributes.GetMetadata().GetName() != "c" || st.Attributes.Labels["container"] != "c" ||
			st.Cpu.GetTimestamp() == 0 || st.Memory.GetTimestamp() == 0 {
			t.Fatalf("stats lack attributes or timestamps: %v", st)
		}
		return st
	}
	created := get()
	if created.Cpu.UsageCoreNanoSeconds.Value != 0 || created.Memory.WorkingSetBytes.Value != 0 {
		t.Fatalf("a created container uses resources: %v", created)
	}
	startContainer(t, s, id)
	now = now.Add(10 * time.Second)
	a := get()
	now = now.Add(10 * time.Second)
	b := get()
	if !(b.Cpu.UsageCoreNanoSeconds.Value > a.Cpu.UsageCoreNanoSeconds.Value && a.Cpu.UsageCoreNanoSeconds.Value > 0) {
		t.Fatalf("CPU does not grow: %d then %d", a.Cpu.UsageCoreNanoSeconds.Value, b.Cpu.UsageCoreNanoSeconds.Value)
	}
	if !(b.Memory.WorkingSetBytes.Value > a.Memory.WorkingSetBytes.Value && a.Memory.WorkingSetBytes.Value > 0) {
		t.Fatalf("memory does not grow: %d then %d", a.Memory.WorkingSetBytes.Value, b.Memory.WorkingSetBytes.Value)
	}
	s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id})
	c1 := get()
	now = now.Add(time.Hour)
	if c2 := get(); c2.Cpu.UsageCoreNanoSeconds.Value != c1.Cpu.UsageCoreNanoSeconds.Value {
		t.Fatalf("CPU of an exited container keeps growing")
	}
	_, err := s.ContainerStats(context.Background(), &runtimeapi.ContainerStatsRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestListContainerStatsFilters(t *testing.T) {
	s := newService(t)
	p1 := runPod(t, s, "p1")
	p2 := runPod(t, s, "p2")
	a := createContainer(t, s, p1, "a")
	b := createContainer(t, s, p1, "b")
	c := createContainer(t, s, p2, "c")
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerStatsFilter
		want   []string
	}{
		{"all", nil, []string{a, b, c}},
		{"id", &runtimeapi.ContainerStatsFilter{Id: b}, []string{b}},
		{"sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: p2}, []string{c}},
		{"labels", &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"container": "a"}}, []string{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range resp.Stats {
				got = append(got, st.Attributes.Id)
			}
			if !equalIDs(got, tc.want) {
				t.Fatalf("got %v want %v", short(got), short(tc.want))
			}
		})
	}
}

func TestPodSandboxStats(t *testing.T) {
	s := newService(t)
	p1 := runPod(t, s, "p1")
	p2 := runPod(t, s, "p2")
	id := createContainer(t, s, p1, "a")
	startContainer(t, s, id)
	resp, err := s.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: p1})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Stats
	if st.Attributes.GetId() != p1 || st.Attributes.GetMetadata().GetName() != "p1" || len(st.Linux.GetContainers()) != 1 ||
		st.Linux.GetProcess().GetProcessCount().GetValue() != 2 || st.Linux.GetNetwork().GetDefaultInterface().GetName() != "eth0" ||
		st.Linux.Memory.WorkingSetBytes.Value <= st.Linux.Containers[0].Memory.WorkingSetBytes.Value {
		t.Fatalf("pod stats: %v", st)
	}
	_, err = s.PodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: "nope"})
	wantCode(t, err, codes.NotFound)
	list, err := s.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{"app": "p2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Stats) != 1 || list.Stats[0].Attributes.Id != p2 {
		t.Fatalf("ListPodSandboxStats by label: %v", list.Stats)
	}
	all, _ := s.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
	if len(all.Stats) != 2 {
		t.Fatalf("ListPodSandboxStats: %d entries, want 2", len(all.Stats))
	}
}
