package runtime

import (
	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/cri-fake/process"
)

// holdMounts keeps a container's view when it holds kernel mounts (a private copy of a host
// tree for an rprivate mount, or a bidirectional mount its processes may mount below on the
// host), so that removing the container gives them back. Views without any cost nothing here.
func (l *Simulated) holdMounts(id string, fs *process.FS) {
	if fs == nil || !fs.HoldsKernelMounts() {
		return
	}
	l.mu.Lock()
	old := l.mounts[id]
	if l.mounts == nil {
		l.mounts = map[string]*process.FS{}
	}
	l.mounts[id] = fs
	l.mu.Unlock()
	if old != nil && old != fs {
		l.releaseView(id, old)
	}
}

// releaseMounts undoes what the container's view holds in the kernel (RemoveContainer).
func (l *Simulated) releaseMounts(id string) {
	l.mu.Lock()
	fs := l.mounts[id]
	delete(l.mounts, id)
	l.mu.Unlock()
	if fs != nil {
		l.releaseView(id, fs)
	}
}

func (l *Simulated) releaseView(id string, fs *process.FS) {
	if err := fs.Release(); err != nil {
		l.logf("container %s: releasing its mounts: %v", id, err)
	}
}

// treeBudget is how many private copies of host trees the views may hold at once: a quarter of
// the open-file limit, each copy being a descriptor for its container's lifetime (the rest stays
// for sockets, log files and the kernel's namespace files).
func treeBudget() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return 4096
	}
	return int(lim.Cur / 4)
}

// copyPrivateMounts takes the private copies of a container's rprivate mounts; past the budget
// a mount reads the host path as the host sees it, which is said once in the log.
func (l *Simulated) copyPrivateMounts(id string, fs *process.FS) {
	if fs == nil {
		return
	}
	if short := fs.CopyPrivateMounts(l.trees); short > 0 && l.treesShort.CompareAndSwap(false, true) {
		l.logf("container %s: %d rprivate mounts read the host's view: the budget of private mount copies (a quarter of the open-file limit) is spent; later ones are not logged", id, short)
	}
}
