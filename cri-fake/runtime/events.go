package runtime

import (
	"sync"
	"sync/atomic"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
)

// broker fans container events out to GetContainerEvents streams. Events are built only while
// somebody listens, so the lifecycle hot path pays one atomic load when nobody does.
type broker struct {
	n      atomic.Int32
	mu     sync.Mutex
	subs   map[chan *runtimeapi.ContainerEventResponse]struct{}
	closed bool
}

func newBroker() *broker {
	return &broker{subs: map[chan *runtimeapi.ContainerEventResponse]struct{}{}}
}

func (b *broker) subscribe() (chan *runtimeapi.ContainerEventResponse, func()) {
	ch := make(chan *runtimeapi.ContainerEventResponse, 1024)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	b.subs[ch] = struct{}{}
	b.n.Add(1)
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			b.n.Add(-1)
			close(ch)
		}
	}
}

func (b *broker) publish(ev *runtimeapi.ContainerEventResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			// A listener that fell 1024 events behind loses events; the kubelet's evented PLEG
			// relists when it notices, which is what it does with containerd too.
		}
	}
}

func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
	b.n.Store(0)
}

// emit publishes an event about a container (or, with c nil, about the sandbox itself, which
// containerd reports with the sandbox ID as container ID). It carries the sandbox status and the
// statuses of the sandbox's containers, as the kubelet's evented PLEG expects.
func (s *Service) emit(typ runtimeapi.ContainerEventType, sb *store.Sandbox, c *store.Container) {
	if s.events.n.Load() == 0 {
		return
	}
	id := sb.ID
	if c != nil {
		id = c.ID
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          s.now().UnixNano(),
		PodSandboxStatus:   s.sandboxStatus(sb),
	}
	for _, cc := range s.containers.InSandbox(sb.ID) {
		ev.ContainersStatuses = append(ev.ContainersStatuses, s.containerStatus(cc))
	}
	if c != nil && typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		ev.ContainersStatuses = append(ev.ContainersStatuses, s.containerStatus(c))
	}
	s.events.publish(ev)
}

// GetContainerEvents streams container events until the client goes away or cri-fake stops.
func (s *Service) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ch, cancel := s.events.subscribe()
	defer cancel()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}
