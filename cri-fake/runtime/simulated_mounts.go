package runtime

import "github.com/plugsim/plugsim/cri-fake/process"

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
