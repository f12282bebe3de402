package runtime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventStream is an in-memory GetContainerEvents stream.
type eventStream struct {
	grpc.ServerStream
	ctx context.Context
	ch  chan *runtimeapi.ContainerEventResponse
}

func (s *eventStream) Context() context.Context { return s.ctx }
func (s *eventStream) Send(ev *runtimeapi.ContainerEventResponse) error {
	s.ch <- ev
	return nil
}

func TestGetContainerEvents(t *testing.T) {
	s := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	st := &eventStream{ctx: ctx, ch: make(chan *runtimeapi.ContainerEventResponse, 100)}
	done := make(chan error, 1)
	go func() { done <- s.GetContainerEvents(&runtimeapi.GetEventsRequest{}, st) }()
	// Wait until the stream is subscribed.
	for s.events.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	pod := runPod(t, s, "p")
	id := createContainer(t, s, pod, "c")
	startContainer(t, s, id)
	s.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5})
	s.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id})

	type ev struct {
		id  string
		typ runtimeapi.ContainerEventType
	}
	want := []ev{
		{pod, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{pod, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	for i, w := range want {
		select {
		case got := <-st.ch:
			if got.ContainerId != w.id || got.ContainerEventType != w.typ {
				t.Fatalf("event %d: got %s %v, want %s %v", i, got.ContainerId[:8], got.ContainerEventType, w.id[:8], w.typ)
			}
			if got.PodSandboxStatus.GetMetadata().GetName() != "p" || got.CreatedAt == 0 {
				t.Fatalf("event %d lacks the sandbox status the evented PLEG needs: %v", i, got)
			}
			if w.id == id && len(got.ContainersStatuses) == 0 {
				t.Fatalf("event %d lacks container statuses", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d (%v) not received", i, w.typ)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stream ended with %v", err)
	}
	if n := s.events.n.Load(); n != 0 {
		t.Fatalf("%d subscribers left after the stream ended", n)
	}
}
