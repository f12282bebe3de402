package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Many clients creating and removing pods at once, some racing for the same pod names, then
// the state must be consistent: every kept pod has its containers, nothing removed lingers, and
// each name is used by at most one sandbox.
func TestConcurrentPodLifecycles(t *testing.T) {
	s := newService(t)
	const workers, rounds = 16, 25
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				// Workers pair up on names, so duplicates race in RunPodSandbox.
				name := fmt.Sprintf("pod-%d-%d", w/2, r)
				resp, err := s.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig(name)})
				if status.Code(err) == codes.AlreadyExists {
					continue
				}
				if err != nil {
					errs <- err
					continue
				}
				id := resp.PodSandboxId
				c, err := s.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: id, Config: containerConfig("app")})
				if err != nil {
					errs <- err
					continue
				}
				if _, err := s.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
					errs <- err
				}
				s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				s.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				if r%2 == 0 { // remove half of them again
					if _, err := s.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
						errs <- err
					}
					if _, err := s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pods, _ := s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	ctrs, _ := s.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	names := map[string]bool{}
	for _, p := range pods.Items {
		if names[p.Metadata.Name] {
			t.Errorf("two sandboxes named %s", p.Metadata.Name)
		}
		names[p.Metadata.Name] = true
		if p.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("kept pod %s is %v", p.Metadata.Name, p.State)
		}
	}
	// Each kept pod was created once, by one of its two workers, for each odd round.
	if want := workers / 2 * (rounds / 2); len(pods.Items) != want {
		t.Errorf("%d pods left, want %d", len(pods.Items), want)
	}
	if len(ctrs.Containers) != len(pods.Items) {
		t.Errorf("%d containers for %d pods", len(ctrs.Containers), len(pods.Items))
	}
	for _, c := range ctrs.Containers {
		if _, err := s.sandboxes.Get(c.PodSandboxId); err != nil {
			t.Errorf("container %s outlived its sandbox", c.Id[:8])
		}
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s is %v", c.Id[:8], c.State)
		}
	}
}
