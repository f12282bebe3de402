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
	// selector for every pod it inspects (GetPodStatus), so it must not cost a full scan.
	byPod map[string]map[string]T
	seq   map[string]uint64 // insertion sequence, to order subsets like the full list
	next  uint64
}

// PodUIDLabel is the label the kubelet puts on every sandbox and container it creates.
const PodUIDLabel = "io.kubernetes.pod.uid"

func newIndex[T any]() index[T] {
	return index[T]{byID: map[string]T{}, names: map[string]string{}, byPod: map[string]map[string]T{}, seq: map[string]uint64{}}
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
		x.next++
		x.seq[id] = x.next
	}
	x.byID[id] = v
	if podUID != "" {
		m := x.byPod[podUID]
		if m == nil {
			m = map[string]T{}
			x.byPod[podUID] = m
		}
		m[id] = v
	}
}

// inPod returns the objects labelled with a pod UID, in insertion order.
func (x *index[T]) inPod(podUID string) []T {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.sorted(x.byPod[podUID])
}

// sorted returns the values of m in insertion order; the caller holds the lock.
func (x *index[T]) sorted(m map[string]T) []T {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return int(x.seq[a]) - int(x.seq[b]) })
	out := make([]T, len(ids))
	for i, id := range ids {
		out[i] = m[id]
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
	delete(x.seq, id)
	if m := x.byPod[podUID]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(x.byPod, podUID)
		}
	}
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
