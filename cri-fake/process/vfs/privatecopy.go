package vfs

import (
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// rprivate mounts: the private copies of the host's mount trees the views
// read them through (see mounttable.go).

// hostTree is a private copy of a host mount tree (an open_tree fd); file is
// nil once released.
type hostTree struct{ file *os.File }

// TreeBudget bounds the private copies of host trees all the views of one
// runtime hold: each is a file descriptor for as long as its container
// exists, and a node of thousands of containers must keep descriptors for
// its sockets and logs. Safe for concurrent use; nil allows none.
type TreeBudget struct {
	mu   sync.Mutex
	left int
}

// NewTreeBudget allows n private copies at a time.
func NewTreeBudget(n int) *TreeBudget { return &TreeBudget{left: n} }

func (b *TreeBudget) take() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

func (b *TreeBudget) give() {
	b.mu.Lock()
	b.left++
	b.mu.Unlock()
}

// CopyPrivateMounts takes, for each rprivate directory mount of the config,
// a private copy of the host's mount tree at its host path
// (open_tree(OPEN_TREE_CLONE|AT_RECURSIVE), made private), which the mount's
// operations go through from then on: what the host mounts below the path
// later is not in it. The runtime calls it when the view is built. Without
// CAP_SYS_ADMIN (cri-fake not root) nothing is copied and the mounts read
// the host path as the host sees it, which such a host cannot change by
// mounting anyway; past b's bound the same. short is how many mounts b left
// uncopied.
func (f *FS) CopyPrivateMounts(b *TreeBudget) (short int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mtab != nil && f.mtab.release {
		return 0
	}
	for _, mp := range f.mounts {
		if mp.prop != PropagationPrivate || !mp.isDir() || mp.tree != nil || mp.sub != "" {
			continue
		}
		if !b.take() {
			short++
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, mp.dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err == nil {
			// Private, so nothing the host does reaches it whatever later
			// kernels propagate into detached trees.
			if err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Propagation: unix.MS_PRIVATE}); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			b.give()
			return short // not permitted here: the host's view for all
		}
		t := &hostTree{file: os.NewFile(uintptr(fd), mp.dir)}
		f.table().trees = append(f.table().trees, t)
		f.mtab.budget = b
		mp.tree = t
	}
	return short
}

// openBase opens the directory m's operations go through: its host
// directory, or its private copy of the host tree, and below that sub for a
// bind made inside the container.
func (m *mountPoint) openBase() (*os.Root, error) {
	dir := m.dir
	if m.tree != nil {
		if m.tree.file == nil {
			return nil, syscall.ENOENT
		}
		dir = "/proc/self/fd/" + strconv.Itoa(int(m.tree.file.Fd()))
	}
	r, err := os.OpenRoot(dir)
	if err != nil || m.sub == "" {
		return r, err
	}
	sub, err := r.OpenRoot(m.sub)
	r.Close()
	return sub, err
}

// deleted reports whether st is a directory the host removed (a copy of the
// tree still holds it): operations fail there as in a removed directory.
func deleted(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && s.Nlink == 0
}
