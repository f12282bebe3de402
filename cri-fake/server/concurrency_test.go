package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Many clients, each on its own connection, run pod lifecycles at once over the socket while
// another lists; afterwards exactly the pods that were kept exist, each with its container.
func TestManyClientsOverTheSocket(t *testing.T) {
	s, c := start(t, Options{})
	ctx := context.Background()
	if _, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	const clients, pods = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients*pods)
	stop, stopped := make(chan struct{}), make(chan struct{})
	lister := runtimeapi.NewRuntimeServiceClient(dial(t, s.Endpoint()))
	go func() { // a PLEG-like lister
		defer close(stopped)
		rt := lister
		for {
			select {
			case <-stop:
				return
			default:
				rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			}
		}
	}()
	for w := range clients {
		wg.Add(1)
		rt := runtimeapi.NewRuntimeServiceClient(dial(t, s.Endpoint()))
		go func() {
			defer wg.Done()
			for i := range pods {
				sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podConfig(fmt.Sprintf("c%d-p%d", w, i))})
				if err != nil {
					errs <- err
					continue
				}
				ctr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
					Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Command: []string{"sleep", "3600"}}})
				if err != nil {
					errs <- err
					continue
				}
				if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
					errs <- err
				}
				if i%4 != 0 { // keep every fourth pod
					if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-stopped
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, _ := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	ctrs, _ := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if want := clients * pods / 4; len(list.Items) != want || len(ctrs.Containers) != want {
		t.Fatalf("%d pods and %d containers left, want %d of each", len(list.Items), len(ctrs.Containers), want)
	}
	for _, ctr := range ctrs.Containers {
		if ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("kept container %s is %v", ctr.Id[:8], ctr.State)
		}
	}
}
