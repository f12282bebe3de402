package store

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stringMaps shares equal label and annotation maps among the containers that hold them. The
// kubelet gives the replicas of a pod template the same annotations (the container's hash,
// restart count, termination message path and policy), and the attempts of one container the
// same labels; a Go map of even two entries takes an 8-slot group and a header (336 bytes before
// its strings), and a node keeps two per container (BenchmarkLargeNode, cri-fake/server).
//
// The image a config names (its ImageSpec: a message of about 100 bytes and two copies of the
// reference) is shared the same way among the containers of one image, when it has no
// annotations or unknown fields.
//
// A container's metadata (its name and attempt: a message of 64 bytes and its name) is shared the
// same way among the containers of one name and attempt, the replicas of a pod template.
//
// The user a container runs as (ContainerStatus.user: two messages and a slice, about 150 bytes)
// is shared the same way among the containers that run as the same uid, gid and groups.
//
// A sandbox store has a table of its own, for its sandboxes' labels, annotations and namespace
// options (PackedSandboxConfig).
//
// A shared map, image or user is counted: it is kept while a container of the store holds it and
// forgotten with the last, so the table never holds more of them than the store holds containers.
type stringMaps struct {
	mu     sync.Mutex
	seed   maphash.Seed
	byHash map[uint64][]*sharedMap
	images counted[imageKey, *runtimeapi.ImageSpec]
	users  counted[userKey, *runtimeapi.ContainerUser]
	metas  counted[metaKey, *runtimeapi.ContainerMetadata]
	// namespaces are sandboxes' namespace options (PackedSandboxConfig): the kubelet sends the
	// same few to every pod.
	namespaces counted[namespacesKey, *runtimeapi.NamespaceOption]
}

// counted is a table of values shared among the store's containers, under the key keyOf gives
// (false: a value not shared): each is kept while a container holds it and forgotten with the last.
type counted[K comparable, V any] struct {
	keyOf func(V) (K, bool)
	byKey map[K]*countedValue[V]
}

type countedValue[V any] struct {
	v    V
	refs int
}

func newCounted[K comparable, V any](keyOf func(V) (K, bool)) counted[K, V] {
	return counted[K, V]{keyOf: keyOf, byKey: map[K]*countedValue[V]{}}
}

// share returns the value equal to v that the table keeps, now held once more, or keeps v and
// returns it; a value with no key is returned as it is.
func (t counted[K, V]) share(v V) V {
	k, ok := t.keyOf(v)
	if !ok {
		return v
	}
	if s := t.byKey[k]; s != nil {
		s.refs++
		return s.v
	}
	t.byKey[k] = &countedValue[V]{v: v, refs: 1}
	return v
}

// release lets go of one hold of the value equal to v, forgetting it with the last.
func (t counted[K, V]) release(v V) {
	k, ok := t.keyOf(v)
	if !ok {
		return
	}
	if s := t.byKey[k]; s != nil {
		if s.refs--; s.refs <= 0 {
			delete(t.byKey, k)
		}
	}
}

type metaKey struct {
	name    string
	attempt uint32
}

// metaKeyOf is the key a container's metadata is shared under; false when it is not shared.
func metaKeyOf(m *runtimeapi.ContainerMetadata) (metaKey, bool) {
	if m == nil || len(m.ProtoReflect().GetUnknown()) > 0 {
		return metaKey{}, false
	}
	return metaKey{m.GetName(), m.GetAttempt()}, true
}

type namespacesKey struct {
	network, pid, ipc runtimeapi.NamespaceMode
	target            string
}

// namespacesKeyOf is the key a sandbox's namespace options are shared under; false when they
// are not shared (none, a user namespace, unknown fields).
func namespacesKeyOf(o *runtimeapi.NamespaceOption) (namespacesKey, bool) {
	if o == nil || o.GetUsernsOptions() != nil || len(o.ProtoReflect().GetUnknown()) > 0 {
		return namespacesKey{}, false
	}
	return namespacesKey{o.GetNetwork(), o.GetPid(), o.GetIpc(), o.GetTargetId()}, true
}

type userKey struct {
	uid, gid int64
	groups   string // the supplemental groups, each as 8 bytes
}

// userKeyOf is the key a user is shared under; false when it is not shared.
func userKeyOf(u *runtimeapi.ContainerUser) (userKey, bool) {
	l := u.GetLinux()
	if l == nil || len(u.ProtoReflect().GetUnknown()) > 0 || len(l.ProtoReflect().GetUnknown()) > 0 {
		return userKey{}, false
	}
	groups := make([]byte, 0, 8*len(l.GetSupplementalGroups()))
	for _, g := range l.GetSupplementalGroups() {
		groups = binary.LittleEndian.AppendUint64(groups, uint64(g))
	}
	return userKey{l.GetUid(), l.GetGid(), string(groups)}, true
}

type imageKey struct{ image, userSpecified, runtimeHandler string }

// imageKeyOf is the key an image spec is shared under; false when it is not shared.
func imageKeyOf(spec *runtimeapi.ImageSpec) (imageKey, bool) {
	if spec == nil || len(spec.GetAnnotations()) > 0 || len(spec.ProtoReflect().GetUnknown()) > 0 {
		return imageKey{}, false
	}
	return imageKey{spec.GetImage(), spec.GetUserSpecifiedImage(), spec.GetRuntimeHandler()}, true
}

type sharedMap struct {
	m    map[string]string
	refs int
}

func newStringMaps() stringMaps {
	return stringMaps{seed: maphash.MakeSeed(), byHash: map[uint64][]*sharedMap{}, images: newCounted(imageKeyOf), users: newCounted(userKeyOf), metas: newCounted(metaKeyOf), namespaces: newCounted(namespacesKeyOf)}
}

// hash is the same for equal maps, whatever their iteration order: the sum of each entry's hash.
func (t *stringMaps) hash(m map[string]string) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(t.seed)
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}

// shareLocked returns the shared map equal to m (m itself, counted, when there is none yet); an
// empty map is returned as it is.
func (t *stringMaps) shareLocked(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := t.hash(m)
	for _, s := range t.byHash[h] {
		if maps.Equal(s.m, m) {
			s.refs++
			return s.m
		}
	}
	t.byHash[h] = append(t.byHash[h], &sharedMap{m: m, refs: 1})
	return m
}

// releaseLocked gives back one hold on the shared map equal to m.
func (t *stringMaps) releaseLocked(m map[string]string) {
	if len(m) == 0 {
		return
	}
	h := t.hash(m)
	ss := t.byHash[h]
	for i, s := range ss {
		if !maps.Equal(s.m, m) {
			continue
		}
		if s.refs--; s.refs > 0 {
			return
		}
		if len(ss) == 1 {
			delete(t.byHash, h)
			return
		}
		ss[i] = ss[len(ss)-1]
		ss[len(ss)-1] = nil
		t.byHash[h] = ss[:len(ss)-1]
		return
	}
}

// share makes c's labels, annotations, image, metadata and user the shared ones (once: a second Add
// changes nothing; nor does a container without a config).
func (t *stringMaps) share(c *Container) {
	p := c.Config
	if p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.shared {
		return
	}
	p.labels, p.annotations, p.shared = t.shareLocked(p.labels), t.shareLocked(p.annotations), true
	p.image = t.images.share(p.image)
	p.metadata = t.metas.share(p.metadata)
	c.User = t.users.share(c.User)
}

// release gives back c's holds on its shared maps, image, metadata and user.
func (t *stringMaps) release(c *Container) {
	p := c.Config
	if p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !p.shared {
		return
	}
	t.releaseLocked(p.labels)
	t.releaseLocked(p.annotations)
	t.images.release(p.image)
	t.metas.release(p.metadata)
	t.users.release(c.User)
	p.shared = false
}

// shareSandbox makes sb's labels, annotations and namespace options the shared ones (once, as
// share).
func (t *stringMaps) shareSandbox(sb *Sandbox) {
	p := sb.Config
	if p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.shared {
		return
	}
	p.labels, p.annotations, p.shared = t.shareLocked(p.labels), t.shareLocked(p.annotations), true
	p.namespaces = t.namespaces.share(p.namespaces)
}

// releaseSandbox gives back sb's holds on its shared maps and namespace options.
func (t *stringMaps) releaseSandbox(sb *Sandbox) {
	p := sb.Config
	if p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !p.shared {
		return
	}
	t.releaseLocked(p.labels)
	t.releaseLocked(p.annotations)
	t.namespaces.release(p.namespaces)
	p.shared = false
}
