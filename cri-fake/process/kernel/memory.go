package kernel

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// The memory model: a container's memory is what the simulation allocates for it, not
// real RSS. It is the sum of
//   - what its programs hold (Proc.Charge, Held, HoldString): the shell's variables,
//     functions and positional parameters, the parsed tree of the script line it runs, a
//     script read whole, a command's expanded words, here-documents and command
//     substitution output, the lines and inputs the applets hold (grep's, sort's), dd's
//     block buffer, and each process's argv and environment,
//   - the content of its files on /dev/shm, which live in cri-fake's memory as a tmpfs does
//     in the node's (vfs.FS.ShmHeld); the rest of its own layer lives in cri-fake's memory
//     too, but is disk on a node (overlayfs): it is bounded by the same limit (a write past
//     it fails with ENOSPC, vfs) and never makes the OOM killer run, so a container that
//     filled /tmp still runs its next command,
//   - the image behaviour's memoryBytes while the container runs (only with a limit: it is
//     a figure, not memory cri-fake holds).
// Stats adds a plausible resident size per process (appletMemory), which is not charged.
// With a limit (memory_limit_in_bytes, Spec.MemoryLimit) an allocation that would take
// the sum past it, a write to /dev/shm past it, the start of a container whose image
// behaviour alone is past it, or a lower limit than the sum (UpdateContainerResources)
// invokes the OOM killer: every process of the container is killed with SIGKILL (exit
// code 137), as the kubelet's memory.oom.group=1 cgroup does, and the process reports
// OOMKilled (containerd's reason "OOMKilled"). Without a limit the container is bounded
// all the same, by DefaultMemoryLimit: cri-fake's memory is every container's, so an
// allocation past it invokes the OOM killer too (as the node's would, once the node's
// memory ran out), and its files stop at it with ENOSPC.

// DefaultMemoryLimit bounds the memory of a container whose config sets no limit, as a limit
// does: what its programs hold with its /dev/shm files (the OOM killer's count), and its own
// files with what its programs hold (ENOSPC past it): 64 MiB, the files' bound
// vfs.DefaultMemoryLimit. cri-fake holds at most about twice the limit for a container.
const DefaultMemoryLimit = vfs.DefaultMemoryLimit

// memoryCgroup is a container's memory controller (memory.max and its usage).
type memoryCgroup struct {
	limit atomic.Int64 // 0: no limit (DefaultMemoryLimit bounds it)
	anon  atomic.Int64 // what the container's programs hold (Charge, Uncharge)
	oom   atomic.Bool  // the OOM killer ended the container

	sharedMu sync.Mutex
	shared   map[any]*sharedCharge // what several processes hold (ChargeShared)
}

type sharedCharge struct {
	n    int64
	refs int
}

// memoryUsage is the container's memory as the OOM killer counts it: what it charged, its
// /dev/shm files and the behaviour's figure.
func (c *container) memoryUsage() uint64 {
	return c.chargedMemory() + uint64(max(c.fs.ShmHeld(), 0))
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

// overLimit reports whether the container's memory plus more bytes is past its limit, or
// without one past DefaultMemoryLimit (the behaviour's figure aside).
func (c *container) overLimit(more int64) bool {
	if limit := c.mem.limit.Load(); limit > 0 {
		return c.memoryUsage()+uint64(max(more, 0)) > uint64(limit)
	}
	return max(c.mem.anon.Load(), 0)+max(c.fs.ShmHeld(), 0)+max(more, 0) > DefaultMemoryLimit
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

// Other is the container's memory besides its files, counted against their bound: what its
// programs hold, and with a limit the behaviour's figure too.
func (m memoryCgroupOfFS) Other() int64 {
	if m.c.mem.limit.Load() <= 0 {
		return max(m.c.mem.anon.Load(), 0)
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

// ChargeShared charges n bytes held under key by possibly several of the container's
// processes (a string a shell and its subshells share, a function's tree): charged once, when
// the first holder takes it, as a page shared after fork is charged to the cgroup once. Each
// ChargeShared is undone by one UnchargeShared of the same key.
func (p *Proc) ChargeShared(key any, n int64) error {
	m := &p.c.mem
	m.sharedMu.Lock()
	defer m.sharedMu.Unlock()
	if s := m.shared[key]; s != nil {
		s.refs++
		return nil
	}
	if err := p.Charge(n); err != nil {
		return err
	}
	if m.shared == nil {
		m.shared = map[any]*sharedCharge{}
	}
	m.shared[key] = &sharedCharge{n: n, refs: 1}
	return nil
}

// UnchargeShared drops one holder of key; the last gives its bytes back.
func (p *Proc) UnchargeShared(key any) {
	m := &p.c.mem
	m.sharedMu.Lock()
	defer m.sharedMu.Unlock()
	s := m.shared[key]
	if s == nil {
		return
	}
	if s.refs--; s.refs == 0 {
		delete(m.shared, key)
		p.Uncharge(s.n)
	}
}

// PageSize is the granularity of Held's charges (a page: what a kernel charges a cgroup in).
const PageSize = 4096

// stringKey is a string's bytes, for ChargeShared: the same bytes held twice are one charge.
type stringKey struct {
	data *byte
	n    int
}

// HoldString charges s for one more holder: a string of a page or more is charged once however
// many of the container's processes hold the very same bytes (Go strings share them, as forked
// processes share pages); a shorter one is charged to each holder. DropString undoes it.
func (p *Proc) HoldString(s string) error {
	if len(s) < PageSize {
		return p.Charge(int64(len(s)))
	}
	return p.ChargeShared(stringKey{unsafe.StringData(s), len(s)}, int64(len(s)))
}

// DropString gives back what HoldString(s) charged.
func (p *Proc) DropString(s string) {
	if len(s) < PageSize {
		p.Uncharge(int64(len(s)))
		return
	}
	p.UnchargeShared(stringKey{unsafe.StringData(s), len(s)})
}

// Held is memory a program holds while it works and lets go of at the end: a line, an input
// read whole, a buffer, a builder. It is charged to the container in pages as it grows (past the
// limit the OOM killer ends the container and Grow fails with ENOMEM: the program should stop),
// and Release gives it all back. The zero Held charges nothing; make one with Proc.Held.
type Held struct {
	p       *Proc
	used    int64
	charged int64
}

// Held returns an empty Held charging p's container.
func (p *Proc) Held() *Held { return &Held{p: p} }

// Grow holds n bytes more.
func (h *Held) Grow(n int64) error {
	if h == nil || h.p == nil || n <= 0 {
		return nil
	}
	h.used += n
	if h.used <= h.charged {
		return nil
	}
	more := (h.used+PageSize-1)/PageSize*PageSize - h.charged
	if err := h.p.Charge(more); err != nil {
		h.used -= n
		return err
	}
	h.charged += more
	return nil
}

// Size is what is held.
func (h *Held) Size() int64 {
	if h == nil {
		return 0
	}
	return h.used
}

// Release gives back everything held.
func (h *Held) Release() {
	if h == nil || h.p == nil {
		return
	}
	h.p.Uncharge(h.charged)
	h.used, h.charged = 0, 0
}

// ReadAll is ReadBounded, charging what it reads as it reads it: an input read to its end
// (sort's, tail's, a script's) is the program's memory until Release.
func (h *Held) ReadAll(r io.Reader) ([]byte, error) {
	var data []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if len(data)+n > MaxHeldBytes {
				return nil, ErrTooBig
			}
			was := cap(data)
			data = append(data, buf[:n]...)
			if gerr := h.Grow(int64(cap(data) - was)); gerr != nil {
				return nil, gerr
			}
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// ReadFile is ReadAll of the named file of the caller's container.
func (h *Held) ReadFile(name string) ([]byte, error) {
	rc, err := h.p.FS().Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return h.ReadAll(rc)
}

// Lines is a line scanner over r (grep's, cut's, awk's) whose buffer is held here: 64 KiB to start,
// charged at once, growing with a longer line up to MaxHeldBytes. Release h when done.
func (h *Held) Lines(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxHeldBytes)
	h.Grow(64 << 10)
	sc.Split(h.Split(bufio.ScanLines))
	return sc
}

// Split wraps a bufio.Scanner's split function so the scanner's buffer is charged as it grows:
// the buffer holds at least the data the scanner hands split (a line longer than what was read
// so far), and doubles, so the charge follows that data to the next power of two.
func (h *Held) Split(split bufio.SplitFunc) bufio.SplitFunc {
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if need := int64(len(data)); need > h.used {
			size := int64(PageSize)
			for size < need {
				size *= 2
			}
			if err := h.Grow(size - h.used); err != nil {
				return 0, nil, err
			}
		}
		return split(data, atEOF)
	}
}

// argvCost is what a process's argv and environment take (the kernel copies them onto the new
// program's stack at execve): their bytes and a pointer each.
func argvCost(args, env []string) int64 {
	n := int64(0)
	for _, a := range args {
		n += int64(len(a)) + 16
	}
	for _, e := range env {
		n += int64(len(e)) + 16
	}
	return n
}

// chargeImage charges the program t runs now (its argv and environment), giving back what the
// one before held (execve replaces it). Past the limit the OOM killer ends the container.
func (t *task) chargeImage(args, env []string) {
	n := argvCost(args, env)
	t.mu.Lock()
	old := t.image
	t.image = n
	t.mu.Unlock()
	t.c.mem.anon.Add(-old)
	if t.c.overLimit(n) {
		t.c.oomKill()
	}
	t.c.mem.anon.Add(n)
}

// unchargeImage gives back the argv and environment of an ended process.
func (t *task) unchargeImage() {
	t.mu.Lock()
	n := t.image
	t.image = 0
	t.mu.Unlock()
	t.c.mem.anon.Add(-n)
}
