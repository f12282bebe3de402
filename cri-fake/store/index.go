package store

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// index is an ID-keyed, insertion-ordered collection with name reservation, shared by the sandbox
// and container stores. Lookups accept a full ID or a unique prefix, as containerd's truncindex
// does (so `crictl inspectp 3fa9` works).
type index[T any] struct {
	mu    sync.RWMutex
	byID  map[string]T
	order []string          // IDs in insertion order, for stable listings
	names map[string]string // reserved name -> ID
	// byPod indexes objects by their io.kubernetes.pod.uid label: the kubelet lists with that
	// selector for every pod it inspects (GetPodStatus), so it must not cost a full scan. Each
	// pod's objects are a short slice in insertion order, not a map: the indexes of 10,000
	// sandboxes and 30,000 containers held 17.1 MB with a map per pod and the sequence numbers
	// that ordered them, 10.5 MB so (heap after GC, measured once when this changed).
	byPod map[string][]member[T]
}

// member is one object of a pod, with its ID.
type member[T any] struct {
	id string
	v  T
}

// PodUIDLabel is the label the kubelet puts on every sandbox and container it creates.
const PodUIDLabel = "io.kubernetes.pod.uid"

func newIndex[T any]() index[T] {
	return index[T]{byID: map[string]T{}, names: map[string]string{}, byPod: map[string][]member[T]{}}
}

// reserve claims a name for an ID, as containerd's registrar does for
// "<name>_<namespace>_<uid>_<attempt>"; reserving a name twice for the same ID is fine.
func (x *index[T]) reserve(name, id string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if have, ok := x.names[name]; ok && have != id {
		return fmt.Errorf("name %q is reserved for %q: %w", name, have, ErrAlreadyExists)
	}
	x.names[name] = id
	return nil
}

func (x *index[T]) release(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.names, name)
}

func (x *index[T]) add(id, podUID string, v T) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[id]; !ok {
		x.order = append(x.order, id)
	}
	x.byID[id] = v
	if podUID != "" {
		ms := x.byPod[podUID]
		for i := range ms {
			if ms[i].id == id {
				ms[i].v = v
				return
			}
		}
		x.byPod[podUID] = append(ms, member[T]{id, v})
	}
}

// unindexLocked takes id out of the objects of podUID; the caller holds the lock.
func (x *index[T]) unindexLocked(podUID, id string) {
	ms, ok := x.byPod[podUID]
	if !ok {
		return
	}
	ms = slices.DeleteFunc(ms, func(m member[T]) bool { return m.id == id })
	if len(ms) == 0 {
		delete(x.byPod, podUID)
		return
	}
	x.byPod[podUID] = ms
}

// inPod returns the objects labelled with a pod UID, in insertion order.
func (x *index[T]) inPod(podUID string) []T {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ms := x.byPod[podUID]
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.v
	}
	return out
}

func (x *index[T]) get(idOrPrefix string) (T, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var zero T
	if v, ok := x.byID[idOrPrefix]; ok {
		return v, nil
	}
	if idOrPrefix == "" {
		return zero, ErrNotFound
	}
	found := ""
	for _, id := range x.order {
		if strings.HasPrefix(id, idOrPrefix) {
			if found != "" {
				return zero, fmt.Errorf("%q matches %q and %q: %w", idOrPrefix, found, id, ErrAmbiguous)
			}
			found = id
		}
	}
	if found == "" {
		return zero, ErrNotFound
	}
	return x.byID[found], nil
}

func (x *index[T]) remove(id, podUID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[id]; !ok {
		return
	}
	delete(x.byID, id)
	x.unindexLocked(podUID, id)
	if i := slices.Index(x.order, id); i >= 0 {
		x.order = slices.Delete(x.order, i, i+1)
	}
}

func (x *index[T]) list() []T {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]T, len(x.order))
	for i, id := range x.order {
		out[i] = x.byID[id]
	}
	return out
}

func (x *index[T]) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}
