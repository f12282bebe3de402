package server

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// busyLoops is issue 24's reproduction: 200 busy loops in one container.
const busyLoops = `for i in $(seq 200); do while :; do :; done & done; wait`

// TestBusyLoopsLeaveTheServerAnswering: 200 busy loops (`while :; do :; done` in 200 background
// shells) in one container made `crictl ps` take 12–18 s, then time out: 200 runnable goroutines
// stood before each of the gRPC server's in the Go scheduler. The simulated processes now run on
// the node's simulated CPUs (fewer than Go's), so the server answers: 20 ListContainers, each
// given 10 s (generous for a loaded machine under -race; each took 12 s and more before, with no
// race detector), all answer while the loops run. That the loops do run, and are charged, is
// checked by counting: the container's CPU time grows by at least a second while they spin, and
// its CPU rate is over 50 millicores, five times the stats' synthetic idle share (2–9 millicores).
// On a quiet machine the loops hold the one simulated CPU of a 2-core machine but for the hand-offs
// between them (near a core); with the machine's cores busy elsewhere the rate falls with them (208
// millicores was seen beside a build), so the bound tells charged from idle, not fast from slow.
func TestBusyLoopsLeaveTheServerAnswering(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, Options{})
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig("busy")})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, SandboxConfig: podConfig("busy"),
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "spin"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
			Command: []string{"sh", "-c", busyLoops}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.rt.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: 0})
	})
	cpu := func() *runtimeapi.CpuUsage {
		t.Helper()
		call, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		st, err := c.rt.ContainerStats(call, &runtimeapi.ContainerStatsRequest{ContainerId: ctr.ContainerId})
		if err != nil {
			t.Fatalf("ContainerStats while the loops run: %v", err)
		}
		return st.GetStats().GetCpu()
	}
	// The loops spin: a second of CPU time beyond what the first sample shows.
	first := cpu().GetUsageCoreNanoSeconds().GetValue()
	deadline := time.Now().Add(2 * time.Minute)
	for cpu().GetUsageCoreNanoSeconds().GetValue() < first+uint64(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the busy loops used no CPU time in 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 20 {
		call, cancel := context.WithTimeout(ctx, 10*time.Second)
		list, err := c.rt.ListContainers(call, &runtimeapi.ListContainersRequest{})
		cancel()
		if err != nil || len(list.GetContainers()) != 1 {
			t.Fatalf("ListContainers %d of 20 while 200 loops spin: %v", i+1, err)
		}
	}
	if rate := cpu().GetUsageNanoCores().GetValue(); rate < 50_000_000 {
		t.Fatalf("the busy loops' CPU rate is %d nanocores: they are not charged (want over 50 millicores, the idle share's five times)", rate)
	}
}
