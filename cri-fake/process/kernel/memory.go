package kernel

import (
	"sync/atomic"
	"syscall"
)

// The memory model: a container's memory is what the simulation allocates for it, not
// real RSS. It is the sum of
//   - what its programs ask the kernel for (Proc.Charge: dd's block buffer, for one),
//   - the content of its own files (the writable layer, /dev/shm included), which live
//     in cri-fake's memory as a tmpfs does in the node's (vfs.FS.Held),
//   - the image behaviour's memoryBytes while the container runs.
// Stats adds a plausible resident size per process (appletMemory), which is not charged.
// With a limit (memory_limit_in_bytes, Spec.MemoryLimit) an allocation that would take
// the sum past it, a write to /dev/shm past it, the start of a container whose image
// behaviour alone is past it, or a lower limit than the sum (UpdateContainerResources)
// invokes the OOM killer: every process of the container is killed with SIGKILL (exit
// code 137), as the kubelet's memory.oom.group=1 cgroup does, and the process reports
// OOMKilled (containerd's reason "OOMKilled"). Without a limit nothing is checked: a
// charge is one atomic add.

// memoryCgroup is a container's memory controller (memory.max and its usage).
type memoryCgroup struct {
	limit atomic.Int64 // 0: no limit
	anon  atomic.Int64 // what the container's programs hold (Charge, Uncharge)
	oom   atomic.Bool  // the OOM killer ended the container
}

// memoryUsage is the container's memory as the OOM killer counts it: what it charged and
// its files.
func (c *container) memoryUsage() uint64 {
	files, _ := c.fs.Held("")
	return c.chargedMemory() + uint64(max(files, 0))
}

// chargedMemory is the container's memory besides its files: what its programs charged and
// the image behaviour's bytes while it runs. (The plausible per-process figure Stats adds is
// not charged: a 640 KiB sleep would make the small limits containers really run under fail.)
func (c *container) chargedMemory() uint64 {
	c.mu.Lock()
	var mem uint64
	if !c.dead {
		mem = c.spec.Behaviour.MemoryBytes
	}
	c.mu.Unlock()
	return mem + uint64(max(c.mem.anon.Load(), 0))
}

// overLimit reports whether the container's memory plus more bytes is past its limit.
func (c *container) overLimit(more int64) bool {
	limit := c.mem.limit.Load()
	return limit > 0 && c.memoryUsage()+uint64(max(more, 0)) > uint64(limit)
}

// oomKill is the OOM killer: every process of the container ends with SIGKILL (137).
func (c *container) oomKill() {
	c.mem.oom.Store(true)
	for _, t := range c.ownTasks() {
		t.terminate(128 + int(syscall.SIGKILL))
	}
}

// memoryCgroupOfFS is what the container's file system charges /dev/shm writes to
// (vfs.MemoryCgroup).
type memoryCgroupOfFS struct{ c *container }

// Other is the container's memory besides its files, counted against their bound only
// when a limit is set (without one the files keep their own bound, vfs.DefaultMemoryLimit).
func (m memoryCgroupOfFS) Other() int64 {
	if m.c.mem.limit.Load() <= 0 {
		return 0
	}
	return int64(min(m.c.chargedMemory(), 1<<62))
}

// OutOfMemory is a /dev/shm write that does not fit: the OOM killer, when a limit is set
// (tmpfs pages are charged to the cgroup and, without swap, cannot be reclaimed). Without
// one, the write fails as on a full tmpfs.
func (m memoryCgroupOfFS) OutOfMemory() bool {
	if m.c.mem.limit.Load() <= 0 {
		return false
	}
	m.c.oomKill() // only cancels contexts: safe under the FS's lock

	return true
}

// Charge allocates n bytes for the caller (a program's heap or buffer). Past the
// container's memory limit it invokes the OOM killer and returns ENOMEM: the caller is
// being killed and should return. Uncharge gives the bytes back.
func (p *Proc) Charge(n int64) error {
	if n <= 0 {
		return nil
	}
	c := p.c
	if c.overLimit(n) {
		c.oomKill()
		return syscall.ENOMEM
	}
	c.mem.anon.Add(n)
	return nil
}

// Uncharge frees n bytes a Charge took.
func (p *Proc) Uncharge(n int64) {
	if n > 0 {
		p.c.mem.anon.Add(-n)
	}
}

// SetMemoryLimit changes the container's memory limit (UpdateContainerResources; 0: none)
// and the bound of its files with it. A limit below what the container holds invokes the
// OOM killer, as writing a lower memory.max does when reclaim cannot free enough.
func (p *Process) SetMemoryLimit(n int64) {
	c := p.c
	c.mem.limit.Store(max(n, 0))
	c.fs.SetMemoryLimit(n)
	if c.overLimit(0) {
		c.oomKill()
	}
}

// OOMKilled reports whether the OOM killer ended the container.
func (p *Process) OOMKilled() bool { return p.c.mem.oom.Load() }

// startMemoryCgroup applies the limit when the container starts: an image behaviour whose
// memory alone is past it is killed at once.
func (c *container) startMemoryCgroup() {
	c.mem.limit.Store(max(c.spec.MemoryLimit, 0))
	if c.spec.MemoryLimit > 0 {
		c.fs.SetMemoryLimit(c.spec.MemoryLimit) // the files share the limit
	}
	c.fs.SetMemoryCgroup(memoryCgroupOfFS{c})
}

// checkMemoryAtStart kills a container whose memory is past its limit from the start (an
// image behaviour's memoryBytes), as the kernel would at its first allocations.
func (c *container) checkMemoryAtStart() {
	if c.overLimit(0) {
		c.oomKill()
	}
}
