package vfs

import "strings"

// MemoryCgroup is the memory controller of the container whose files these are: the
// files' bytes and the rest of its memory share its limit, and a write to its tmpfs
// (/dev/shm) that does not fit invokes its OOM killer rather than failing with ENOSPC
// (tmpfs pages are charged to the cgroup and, without swap, cannot be reclaimed).
type MemoryCgroup interface {
	// Other is the container's memory besides its files (0 when it has no limit).
	Other() int64
	// OutOfMemory is called, with the FS locked, when a /dev/shm write does not fit; it
	// reports whether it killed the container (false: the write fails with ENOSPC).
	OutOfMemory() bool
}

// SetMemoryCgroup charges the container's files to m from the next write on.
func (f *FS) SetMemoryCgroup(m MemoryCgroup) {
	f.mu.Lock()
	f.memcg = m
	f.mu.Unlock()
}

// otherMemory is the container's memory besides its files. Caller holds f.mu.
func (f *FS) otherMemory() int64 {
	if f.memcg == nil {
		return 0
	}
	return max(f.memcg.Other(), 0)
}

// isTmpfs reports whether the container path p is on the container's /dev/shm.
func isTmpfs(p string) bool { return p == "/dev/shm" || strings.HasPrefix(p, "/dev/shm/") }

// dropHeld stops counting size bytes node n held. Caller holds f.mu.
func (f *FS) dropHeld(n *node, size int64) {
	f.held -= size
	if n.shm {
		f.shm -= size
	}
}

// ShmHeld is what the files written on /dev/shm hold: the part of the container's files that is
// memory on a node too (a tmpfs, charged to the memory cgroup), where the rest of its own layer is
// disk there (overlayfs), bounded here by the same limit but never a cause for the OOM killer.
func (f *FS) ShmHeld() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.shm
}
