package kernel

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// System V IPC namespaces (ipc_namespaces(7)): each holds shared memory segments, message
// queues and semaphore sets, which ipcmk creates and ipcs lists. A pod's
// containers share one (IPC mode POD, the runtime's per-sandbox namespace); hostIPC (mode
// NODE) joins the node's, which also lists the real node's objects from /proc/sysvipc —
// those are read, never created or removed by a container (the node's kernel owns them).
// The model stops at the objects' bookkeeping: nobody attaches a segment (nattch stays 0),
// sends a message or operates a semaphore, nothing removes an object (no ipcrm: a pod's
// namespace goes with its sandbox), and a segment's bytes are not charged to any container's
// memory (a real one is charged to whoever first touches its pages).

// IPCKind is the kind of a System V IPC object.
type IPCKind int

// The kinds of System V IPC object.
const (
	SharedMemory IPCKind = iota
	MessageQueue
	SemaphoreSet
)

// MaxIPCObjects is the most objects of one kind a namespace holds: the kernel's default
// SHMMNI (4096; MSGMNI and SEMMNI are 32000). Past it a create fails with ENOSPC.
const MaxIPCObjects = 4096

// ipcIndexBits is the kernel's IPCMNI_SHIFT: an id is index + sequence << 15.
const ipcIndexBits = 15

// IPCObject is one System V IPC object as ipcs shows it.
type IPCObject struct {
	Kind IPCKind
	Key  int32
	ID   int
	Mode uint32 // permission bits
	UID  int
	GID  int
	// Size is a segment's bytes, a set's semaphores, a queue's used bytes.
	Size uint64
	// Messages is a queue's message count.
	Messages uint64
	Created  time.Time
	// Node marks an object of the real node (hostIPC), read from its /proc/sysvipc.
	Node bool
}

// IPCNamespace is a System V IPC namespace. The zero value is an empty one.
type IPCNamespace struct {
	// sysvipc is the directory the node's own objects are read from (/proc/sysvipc), "" for
	// a namespace of the simulation only.
	sysvipc string

	mu   sync.Mutex
	seq  [3]int
	objs [3]map[int]*IPCObject
}

// NewIPCNamespace returns an empty IPC namespace (a pod's, or a container's own).
func NewIPCNamespace() *IPCNamespace { return &IPCNamespace{} }

// NewNodeIPCNamespace returns the node's IPC namespace (hostIPC): the simulation's objects
// made in it, and the node's real ones read from sysvipcDir (normally /proc/sysvipc).
func NewNodeIPCNamespace(sysvipcDir string) *IPCNamespace {
	return &IPCNamespace{sysvipc: sysvipcDir}
}

// nodeObjects reads the node's objects of kind from its /proc/sysvipc file; an unreadable
// file is no objects (a kernel without SysV IPC).
func (ns *IPCNamespace) nodeObjects(kind IPCKind) []IPCObject {
	if ns.sysvipc == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(ns.sysvipc, [...]string{"shm", "msg", "sem"}[kind]))
	if err != nil {
		return nil
	}
	return parseSysvipc(kind, data)
}

// parseSysvipc parses a /proc/sysvipc file: a header line naming the columns, then one
// line per object.
func parseSysvipc(kind IPCKind, data []byte) []IPCObject {
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cols map[string]int
	var out []IPCObject
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if cols == nil {
			cols = map[string]int{}
			for i, c := range f {
				cols[c] = i
			}
			continue
		}
		num := func(name string) int64 {
			i, ok := cols[name]
			if !ok || i >= len(f) {
				return 0
			}
			v, _ := strconv.ParseInt(f[i], 10, 64)
			return v
		}
		mode, _ := strconv.ParseUint(fieldAt(f, cols["perms"]), 8, 32)
		o := IPCObject{Kind: kind, Key: int32(num("key")), Mode: uint32(mode) & 0o777, UID: int(num("uid")), GID: int(num("gid")), Node: true}
		switch kind {
		case SharedMemory:
			o.ID, o.Size = int(num("shmid")), uint64(max(num("size"), 0))
		case MessageQueue:
			o.ID, o.Size, o.Messages = int(num("msqid")), uint64(max(num("cbytes"), 0)), uint64(max(num("qnum"), 0))
		case SemaphoreSet:
			o.ID, o.Size = int(num("semid")), uint64(max(num("nsems"), 0))
		}
		out = append(out, o)
	}
	return out
}

func fieldAt(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// List is the namespace's objects of kind by id, the node's included.
func (ns *IPCNamespace) List(kind IPCKind) []IPCObject {
	if kind < SharedMemory || kind > SemaphoreSet {
		return nil
	}
	out := ns.nodeObjects(kind)
	ns.mu.Lock()
	for _, o := range ns.objs[kind] {
		out = append(out, *o)
	}
	ns.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID%(1<<ipcIndexBits) < out[j].ID%(1<<ipcIndexBits) })
	return out
}

// get is shmget/msgget/semget with IPC_CREAT: the object with key (a new one for
// IPC_PRIVATE, key 0), made with size and mode by uid/gid when there is none.
func (ns *IPCNamespace) get(kind IPCKind, key int32, size uint64, mode uint32, uid, gid int) (int, error) {
	node := ns.nodeObjects(kind)
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if key != 0 {
		for _, o := range node {
			if o.Key == key {
				return o.ID, nil
			}
		}
		for _, o := range ns.objs[kind] {
			if o.Key == key {
				return o.ID, nil
			}
		}
	}
	if ns.objs[kind] == nil {
		ns.objs[kind] = map[int]*IPCObject{}
	}
	used := make(map[int]bool, len(node)+len(ns.objs[kind]))
	for _, o := range node {
		used[o.ID%(1<<ipcIndexBits)] = true
	}
	for id := range ns.objs[kind] {
		used[id%(1<<ipcIndexBits)] = true
	}
	if len(used) >= MaxIPCObjects {
		return 0, syscall.ENOSPC
	}
	idx := 0
	for used[idx] {
		idx++
	}
	// The kernel's ipc_idr_alloc: the sequence grows with each object, so a removed id
	// is not soon reused.
	id := idx + ns.seq[kind]<<ipcIndexBits
	ns.seq[kind] = (ns.seq[kind] + 1) % (1 << (31 - ipcIndexBits))
	ns.objs[kind][id] = &IPCObject{Kind: kind, Key: key, ID: id, Mode: mode & 0o777, UID: uid, GID: gid, Size: size, Created: time.Now()}
	return id, nil
}

// semmsl is the most semaphores in a set (the kernel's SEMMSL).
const semmsl = 32000

// IPCGet is shmget/msgget/semget(key, size, IPC_CREAT|mode) in the caller's IPC namespace:
// the id of the object with key, or of a new one. size is a segment's bytes or a set's
// semaphores (ignored for a queue); 0, or more semaphores than SEMMSL, is EINVAL; a full
// namespace is ENOSPC.
func (p *Proc) IPCGet(kind IPCKind, key int32, size uint64, mode uint32) (int, error) {
	switch kind {
	case SharedMemory:
		if size == 0 {
			return 0, syscall.EINVAL
		}
	case SemaphoreSet:
		if size == 0 || size > semmsl {
			return 0, syscall.EINVAL
		}
	case MessageQueue:
		size = 0
	default:
		return 0, syscall.EINVAL
	}
	id := p.t.id
	return p.c.ipc().get(kind, key, size, mode, id.UID, id.GID)
}

// ipc is the container's IPC namespace: Spec.IPCNamespace, or its own, made on first use
// (most containers never touch one).
func (c *container) ipc() *IPCNamespace {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ipcns == nil {
		c.ipcns = NewIPCNamespace()
	}
	return c.ipcns
}

// IPCList lists the objects of kind in the caller's IPC namespace (ipcs).
func (p *Proc) IPCList(kind IPCKind) []IPCObject { return p.c.ipc().List(kind) }
