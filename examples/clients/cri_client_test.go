package clients

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	criserver "github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/harness/wiring"
)

// A registry that fails twice: EnsureImage must retry and then succeed, and must not pull when
// the image is already there.
func TestEnsureImageRetriesAnUnavailableRegistry(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off", NoCSI: true})
	if _, err := node.CRI.Faults().Add(faults.Rule{Method: "PullImage", Code: "Unavailable", Message: "registry down", Times: 2}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := EnsureImage(ctx, node.ImageClient, "busybox", 5, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		t.Fatal("no image ID")
	}
	want := []string{"ImageStatus:OK", "PullImage:Unavailable", "PullImage:Unavailable", "PullImage:OK"}
	if got := calls(node.CRI.Recorder().Events(), trace.CRI); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}

	// Present now: one ImageStatus, no pull.
	node.CRI.Recorder().Reset()
	if _, err := EnsureImage(ctx, node.ImageClient, "busybox", 5, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := calls(node.CRI.Recorder().Events(), trace.CRI); !slices.Equal(got, []string{"ImageStatus:OK"}) {
		t.Errorf("second EnsureImage made %v", got)
	}
}

// A registry miss is not retried: NotFound is final.
func TestEnsureImageGivesUpOnAMissingImage(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off", NoCSI: true})
	_, err := EnsureImage(context.Background(), node.ImageClient, "example.com/nope:1", 5, time.Millisecond)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("error %v, want NotFound", err)
	}
	if got := calls(node.CRI.Recorder().Events(), trace.CRI); !slices.Equal(got, []string{"ImageStatus:OK", "PullImage:NotFound"}) {
		t.Errorf("calls %v, want ImageStatus and one PullImage", got)
	}
}

// A pull slower than the caller's deadline: cri-fake serves an image whose catalog entry takes a
// minute to pull, the caller gives up after 300 ms, and both the caller and the trace say
// DeadlineExceeded. This uses cri-fake's own server.Start, with an image catalog built in Go.
func TestEnsureImageGivesUpWhenThePullOutlastsTheDeadline(t *testing.T) {
	cat, err := images.NewCatalog(images.DefaultPullLatency, append(images.Builtin(),
		images.CatalogImage{Repositories: []string{"registry.example.com/big"}, Tags: []string{"1.0"}, PullLatency: "1m"})...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := criserver.Start(criserver.Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	events, unsubscribe := srv.Recorder().Subscribe(16)
	t.Cleanup(unsubscribe)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = EnsureImage(ctx, runtimeapi.NewImageServiceClient(conn), "registry.example.com/big:1.0", 3, time.Millisecond)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("error %v, want DeadlineExceeded", err)
	}
	if ev := nextEvent(t, events, "PullImage"); ev.Code != "DeadlineExceeded" {
		t.Errorf("PullImage traced as %s %q, want DeadlineExceeded", ev.Code, ev.Error)
	}
}

// Fault rules and the trace through the admin socket, as a test that drives a fake in another
// process (`harness up`, a fake started by a CI job) would use them.
func TestEnsureImageThroughTheAdminSocket(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off", NoCSI: true, Admin: true})
	adm, err := admin.NewClient(node.CRIAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AddFaults(faults.Rule{Method: "PullImage", Match: map[string]string{"image.image": "*busybox*"}, Code: "Unavailable", Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureImage(context.Background(), node.ImageClient, "busybox", 3, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	evs, err := adm.Trace(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(evs, trace.CRI); !slices.Equal(got, []string{"ImageStatus:OK", "PullImage:Unavailable", "PullImage:OK"}) {
		t.Errorf("admin trace %v", got)
	}
	if err := adm.ClearFaults(); err != nil {
		t.Fatal(err)
	}
}

// The monitoring agent counts running containers per pod: arrange the runtime's state with the
// ordinary CRI calls, then check the agent's answer and that it made a single filtered list.
func TestRunningContainersPerPod(t *testing.T) {
	node := wiring.Start(t, wiring.Options{CNI: "off", NoCSI: true})
	ctx := context.Background()
	img, err := node.ImageClient.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	start := func(pod string, n, stop int) {
		cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: pod, Namespace: "default", Uid: pod}}
		sb, err := node.RuntimeClient.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			c, err := node.RuntimeClient.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
				PodSandboxId: sb.PodSandboxId, SandboxConfig: cfg,
				Config: &runtimeapi.ContainerConfig{
					Metadata: &runtimeapi.ContainerMetadata{Name: string(rune('a' + i))},
					Image:    &runtimeapi.ImageSpec{Image: img.ImageRef},
					// Meant to keep running, so it runs sleep: busybox's default sh, as on
					// containerd, exits at once without stdin.
					Command: []string{"sleep", "3600"},
					Labels:  map[string]string{"io.kubernetes.pod.uid": pod},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := node.RuntimeClient.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
				t.Fatal(err)
			}
			if i < stop {
				if _, err := node.RuntimeClient.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	start("pod-a", 3, 1) // two still running
	start("pod-b", 1, 0)
	node.CRI.Recorder().Reset()
	got, err := RunningContainers(ctx, node.RuntimeClient)
	if err != nil {
		t.Fatal(err)
	}
	if got["pod-a"] != 2 || got["pod-b"] != 1 || len(got) != 2 {
		t.Errorf("running per pod = %v, want pod-a:2 pod-b:1", got)
	}
	evs := node.CRI.Recorder().Events()
	if len(evs) != 1 || evs[0].Method != "ListContainers" || string(evs[0].Request) != `{"filter":{"state":{"state":"CONTAINER_RUNNING"}}}` {
		t.Errorf("recorded %+v, want one ListContainers filtered by state", evs)
	}
}
