// Package ipcns is the simulation's System V IPC namespaces (ipc_namespaces(7)): each holds
// shared memory segments, message queues and semaphore sets, which ipcmk creates and ipcs lists
// (package kernel asks on a program's behalf: Proc.IPCGet, Proc.IPCList). A pod's containers
// share one (IPC mode POD, the runtime's per-sandbox namespace); hostIPC (mode NODE) joins the
// node's, which also lists the real node's objects from /proc/sysvipc — those are read, never
// created or removed by a container (the node's kernel owns them). The model stops at the
// objects' bookkeeping: nobody attaches a segment (nattch stays 0), sends a message or operates
// a semaphore, nothing removes an object (no ipcrm: a pod's namespace goes with its sandbox), and
// a segment's bytes are not charged to any container's memory (a real one is charged to whoever
// first touches its pages).
package ipcns

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

// Kind is the kind of a System V IPC object.
type Kind int

// The kinds of System V IPC object.
const (
	SharedMemory Kind = iota
	MessageQueue
	SemaphoreSet
)

// MaxObjects is the most objects of one kind a namespace holds: the kernel's default
// SHMMNI (4096; MSGMNI and SEMMNI are 32000). Past it a create fails with ENOSPC.
const MaxObjects = 4096

// ipcIndexBits is the kernel's IPCMNI_SHIFT: an id is index + sequence << 15.
const ipcIndexBits = 15

// Object is one System V IPC object as ipcs shows it.
type Object struct {
	Kind Kind
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

// Namespace is a System V IPC namespace. The zero value is an empty one.
type Namespace struct {
	// sysvipc is the directory the node's own objects are read from (/proc/sysvipc), "" for
	// a namespace of the simulation only.
	sysvipc string

	mu   sync.Mutex
	seq  [3]int
	objs [3]map[int]*Object
}

// New returns an empty IPC namespace (a pod's, or a container's own).
func New() *Namespace { return &Namespace{} }

// NewNode returns the node's IPC namespace (hostIPC): the simulation's objects
// made in it, and the node's real ones read from sysvipcDir (normally /proc/sysvipc).
func NewNode(sysvipcDir string) *Namespace {
	return &Namespace{sysvipc: sysvipcDir}
}

// nodeObjects reads the node's objects of kind from its /proc/sysvipc file; an unreadable
// file is no objects (a kernel without SysV IPC).
func (ns *Namespace) nodeObjects(kind Kind) []Object {
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
func parseSysvipc(kind Kind, data []byte) []Object {
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cols map[string]int
	var out []Object
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
		o := Object{Kind: kind, Key: int32(num("key")), Mode: uint32(mode) & 0o777, UID: int(num("uid")), GID: int(num("gid")), Node: true}
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
func (ns *Namespace) List(kind Kind) []Object {
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

// Get is shmget/msgget/semget with IPC_CREAT: the object with key (a new one for
// IPC_PRIVATE, key 0), made with size and mode by uid/gid when there is none. The caller has
// checked size for its kind (Proc.IPCGet); a full namespace is ENOSPC.
func (ns *Namespace) Get(kind Kind, key int32, size uint64, mode uint32, uid, gid int) (int, error) {
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
		ns.objs[kind] = map[int]*Object{}
	}
	used := make(map[int]bool, len(node)+len(ns.objs[kind]))
	for _, o := range node {
		used[o.ID%(1<<ipcIndexBits)] = true
	}
	for id := range ns.objs[kind] {
		used[id%(1<<ipcIndexBits)] = true
	}
	if len(used) >= MaxObjects {
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
	ns.objs[kind][id] = &Object{Kind: kind, Key: key, ID: id, Mode: mode & 0o777, UID: uid, GID: gid, Size: size, Created: time.Now()}
	return id, nil
}
