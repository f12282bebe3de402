package kernel

import (
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel/ipcns"
)

// semmsl is the most semaphores in a set (the kernel's SEMMSL).
const semmsl = 32000

// IPCGet is shmget/msgget/semget(key, size, IPC_CREAT|mode) in the caller's IPC namespace:
// the id of the object with key, or of a new one. size is a segment's bytes or a set's
// semaphores (ignored for a queue); 0, or more semaphores than SEMMSL, is EINVAL; a full
// namespace is ENOSPC.
func (p *Proc) IPCGet(kind ipcns.Kind, key int32, size uint64, mode uint32) (int, error) {
	switch kind {
	case ipcns.SharedMemory:
		if size == 0 {
			return 0, syscall.EINVAL
		}
	case ipcns.SemaphoreSet:
		if size == 0 || size > semmsl {
			return 0, syscall.EINVAL
		}
	case ipcns.MessageQueue:
		size = 0
	default:
		return 0, syscall.EINVAL
	}
	id := p.t.id
	return p.c.ipc().Get(kind, key, size, mode, id.UID, id.GID)
}

// ipc is the container's IPC namespace: Spec.IPCNamespace, or its own, made on first use
// (most containers never touch one).
func (c *container) ipc() *ipcns.Namespace {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ipcns == nil {
		c.ipcns = ipcns.New()
	}
	return c.ipcns
}

// IPCList lists the objects of kind in the caller's IPC namespace (ipcs).
func (p *Proc) IPCList(kind ipcns.Kind) []ipcns.Object { return p.c.ipc().List(kind) }
