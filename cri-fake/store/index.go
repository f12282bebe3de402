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
}

func newIndex[T any]() index[T] {
	return index[T]{byID: map[string]T{}, names: map[string]string{}}
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

func (x *index[T]) add(id string, v T) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[id]; !ok {
		x.order = append(x.order, id)
	}
	x.byID[id] = v
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

func (x *index[T]) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[id]; !ok {
		return
	}
	delete(x.byID, id)
	// Search from the end: recently created objects are the ones usually removed first in
	// test workloads, and kubelet GC removes old ones, so either end is common; keep it simple.
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
