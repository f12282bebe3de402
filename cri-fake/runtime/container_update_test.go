package runtime

import (
	"context"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestUpdateContainerResources(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	res := &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 64 << 20}
	for _, tc := range []struct {
		name  string
		id    string
		setup func()
		want  codes.Code
	}{
		{"created", id, func() {}, codes.OK},
		{"running", id, func() { startContainer(t, s, id) }, codes.OK},
		{"exited", id, func() {
			s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id})
		}, codes.FailedPrecondition},
		{"unknown", "nope", func() {}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			_, err := s.UpdateContainerResources(context.Background(), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: tc.id, Linux: res})
			wantCode(t, err, tc.want)
		})
	}
	if got := containerState(t, s, id).Resources.GetLinux().GetMemoryLimitInBytes(); got != 64<<20 {
		t.Fatalf("resources not recorded: memory limit %d", got)
	}
}

func TestReopenContainerLog(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	_, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition) // not running
	startContainer(t, s, id)
	path := containerState(t, s, id).LogPath
	// A silent process has written no log file yet; the kubelet's log manager reopens the log
	// when it finds none, and after its rotation renamed the file.
	if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no new log file after ReopenContainerLog: %v", err)
	}
	_, err = s.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestUpdatePodSandboxResources(t *testing.T) {
	s := newService(t)
	pod := runPod(t, s, "p")
	_, err := s.UpdatePodSandboxResources(context.Background(), &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: pod, Resources: &runtimeapi.LinuxContainerResources{CpuQuota: 5000}})
	wantCode(t, err, codes.OK)
	if sb, _ := s.sandboxes.Get(pod); sb.Status().Resources.GetCpuQuota() != 5000 {
		t.Fatal("pod resources not recorded")
	}
	_, err = s.UpdatePodSandboxResources(context.Background(), &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "nope"})
	wantCode(t, err, codes.NotFound)
}
