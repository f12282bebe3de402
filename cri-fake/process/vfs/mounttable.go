package vfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// The container's mount namespace, beyond the mounts of its config: how each
// config mount propagates, and the mounts a process of the container makes
// (mount --bind, umount).
//
// rprivate: a directory mount is a private copy of the host's mount tree at
// the host path, taken when the view is built (CopyPrivateMounts:
// open_tree(2) with OPEN_TREE_CLONE|AT_RECURSIVE, then made private): what
// the host mounts below the path later is not in it, as in a runc
// container's private mount namespace. It needs CAP_SYS_ADMIN and a file
// descriptor of the runtime's TreeBudget; without either the view reads the
// host path as the host sees it.
//
// rslave and rshared: the view reads the host path as the host sees it, so
// what the host mounts there later is visible (the detached copy above would
// not receive the host's mounts: the kernel does not propagate into it).
//
// A process's own mounts live in this table and nowhere else, except below a
// bidirectional mount of a privileged container: there the mount is made for
// real on the host, at the host path below the mount's host directory, so
// the host sees it as it sees a mount propagated from a container (a bind of
// a host-backed directory is a real bind; a bind of the container's own
// in-memory tree is a tmpfs holding a copy of it, made at mount time). Those
// are undone by Release (container removal), as cri-fake made them.

// A container's processes make at most maxRuntimeMounts mounts (its table
// stays bounded; Linux bounds a namespace by fs.mount-max), of which at most
// maxHostMounts are real mounts on the host, whose tmpfs copies of the
// container's own tree hold at most its memory limit together.
const (
	maxRuntimeMounts = 1024
	maxHostMounts    = 16
)

// runtimeMount is one mount a process made, in order.
type runtimeMount struct {
	cpath string
	bind  string      // a bind of the container's own tree: the source container path
	mp    *mountPoint // a bind of a host-backed directory or file
	host  *os.File    // a real host mount (O_PATH on its root), undone by Release
	// hostPath is where the real host mount was made (what mountinfo shows
	// of it); hostBytes what its tmpfs copy holds.
	hostPath  string
	hostBytes int64
	// what the mount covers, restored by umount
	prevMP   *mountPoint
	prevBind string
}

// mountTable is the FS's part of the container's mount namespace. Caller
// holds f.mu for everything here.
type mountTable struct {
	binds   map[string]string // mount point → source, both in the container's own tree
	made    []runtimeMount
	trees   []*hostTree
	budget  *TreeBudget // what the trees were taken from
	release bool        // Release was called
}

func (f *FS) table() *mountTable {
	if f.mtab == nil {
		f.mtab = &mountTable{}
	}
	return f.mtab
}

// setPropagation applies cfg's propagation to the mount mp built from it at
// NewFS: containerd's check of the host mount for rslave and rshared.
// hostMounts is read on first need. (rprivate's copy is CopyPrivateMounts.)
func (f *FS) setPropagation(mp *mountPoint, m Mount, hostMounts *[]mountinfo.Mount) error {
	mp.prop = m.Propagation
	if m.Propagation == PropagationPrivate {
		return nil
	}
	if *hostMounts == nil {
		hm, err := mountinfo.Read()
		if err != nil {
			return err
		}
		*hostMounts = hm
	}
	return CheckPropagation(*hostMounts, m.HostPath, m.Propagation)
}

// insertMount puts mp into the lookup tables: f.mounts longest container
// path first, a later mount on the same destination hiding the earlier one
// as the kernel stacks them.
func (f *FS) insertMount(mp *mountPoint) {
	if f.mountAt == nil {
		f.mountAt = map[string]*mountPoint{}
	}
	f.mountAt[mp.cpath] = mp
	f.mounts = append(f.mounts, mp)
	f.sortMounts()
}

func (f *FS) sortMounts() {
	sort.SliceStable(f.mounts, func(i, j int) bool { return len(f.mounts[i].cpath) > len(f.mounts[j].cpath) })
	kept := f.mounts[:0]
	for _, x := range f.mounts {
		if f.mountAt[x.cpath] == x {
			kept = append(kept, x)
		}
	}
	f.mounts = kept
}

// BindMount is mount(2) with MS_BIND (MS_REC when recursive) from a process
// with CAP_SYS_ADMIN in the container: src appears at dst. hostPropagation
// allows a real mount on the host when dst lies in a bidirectional mount
// (the caller is privileged); otherwise the mount is the container's alone.
func (f *FS) BindMount(src, dst string, recursive, hostPropagation bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mtab != nil && f.mtab.release {
		return syscall.ENOENT
	}
	var roots hostRoots
	defer roots.close()
	sl, err := f.walk(&roots, src, true, false)
	if err != nil {
		return pathErr("mount", src, err)
	}
	dl, err := f.walk(&roots, dst, true, false)
	if err != nil {
		return pathErr("mount", dst, err)
	}
	if key, ok := f.mountPointAt(&roots, dst); ok {
		// dst is a mount point already: the new mount goes on top of it
		// there (dl is inside what is mounted).
		dl.cpath = key
	}
	srcDir, err := f.locIsDir(&roots, sl)
	if err != nil {
		return pathErr("mount", src, err)
	}
	dstDir, err := f.locIsDir(&roots, dl)
	if err != nil {
		return pathErr("mount", dst, err)
	}
	if srcDir != dstDir {
		return pathErr("mount", dst, syscall.ENOTDIR)
	}
	if len(f.table().made) >= maxRuntimeMounts {
		// The kernel's bound is fs.mount-max per namespace: ENOSPC past it.
		return pathErr("mount", dst, syscall.ENOSPC)
	}
	rm := runtimeMount{cpath: dl.cpath, prevMP: f.mountAt[dl.cpath], prevBind: f.table().binds[dl.cpath]}
	switch {
	case dl.kind == locHost && dl.m.prop == PropagationBidirectional && hostPropagation:
		if f.mtab.hostMounts() >= maxHostMounts {
			return pathErr("mount", dst, syscall.ENOSPC)
		}
		if rm.host, rm.hostBytes, err = f.hostBind(&roots, sl, dl, srcDir, recursive); err != nil {
			return pathErr("mount", dst, err)
		}
		rm.hostPath = path.Join(dl.m.dir, dl.m.sub, dl.rel)
		// The view reads the host path, where the mount now is.
		rm.prevMP, rm.prevBind = nil, ""
	case sl.kind == locHost:
		r, err := roots.get(sl.m)
		if err != nil {
			return pathErr("mount", src, hostErrno(err))
		}
		st, err := r.Stat(sl.rel)
		if err != nil {
			return pathErr("mount", src, hostErrno(err))
		}
		mp := &mountPoint{cpath: dl.cpath, dir: sl.m.dir, tree: sl.m.tree, ro: sl.m.ro, recursive: sl.m.recursive}
		mp.sub = path.Join(sl.m.sub, sl.rel)
		if !srcDir {
			mp.sub, mp.name = path.Join(sl.m.sub, path.Dir(sl.rel)), path.Base(sl.rel)
			if st, err = r.Stat(path.Dir(sl.rel)); err != nil {
				return pathErr("mount", src, hostErrno(err))
			}
		}
		if mp.sub == "." {
			mp.sub = ""
		}
		var ok bool
		if mp.dev, mp.ino, ok = identity(st); !ok {
			return pathErr("mount", src, syscall.EINVAL)
		}
		rm.mp = mp
		delete(f.table().binds, dl.cpath)
		f.insertMount(mp)
	case sl.kind == locMem:
		if f.mountAt[dl.cpath] != nil {
			delete(f.mountAt, dl.cpath)
			f.sortMounts()
		}
		if f.table().binds == nil {
			f.mtab.binds = map[string]string{}
		}
		f.mtab.binds[dl.cpath] = sl.cpath
		rm.bind = sl.cpath
	default:
		// /proc, /dev and masked paths are not bound here.
		return pathErr("mount", src, syscall.EINVAL)
	}
	f.mtab.made = append(f.mtab.made, rm)
	return nil
}

// mountPointAt is the container path of the mount point p names — its
// parent resolved, its last component not entered — when a mount of the
// container's config or of its processes is there. The real host mounts made
// below a bidirectional mount are the host's, found by resolving p.
func (f *FS) mountPointAt(roots *hostRoots, p string) (string, bool) {
	p = strings.TrimRight(p, "/")
	base := path.Base(p)
	if p == "" || base == "." || base == ".." {
		return "", false
	}
	pl, err := f.walk(roots, path.Dir(p), true, false)
	if err != nil {
		return "", false
	}
	cp := path.Join(pl.cpath, base)
	if f.mountAt[cp] != nil {
		return cp, true
	}
	if f.mtab != nil {
		for _, rm := range f.mtab.made {
			if rm.cpath == cp {
				return cp, true
			}
		}
	}
	return "", false
}

// locIsDir reports whether a resolved location is a directory (ENOENT when
// it does not exist).
func (f *FS) locIsDir(roots *hostRoots, l loc) (bool, error) {
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return false, hostErrno(err)
		}
		st, err := r.Stat(l.rel)
		if err != nil {
			return false, hostErrno(err)
		}
		return st.IsDir(), nil
	case locMem:
		n, ok := f.get(l.cpath)
		if !ok {
			return false, syscall.ENOENT
		}
		return n.isDir(), nil
	}
	return false, syscall.EINVAL
}

// Unmount is umount(2) from a process with CAP_SYS_ADMIN: the mount on top
// at dst goes, and what it covered shows again.
func (f *FS) Unmount(dst string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	cp, ok := f.mountPointAt(&roots, dst)
	if !ok {
		if _, err := f.walk(&roots, dst, true, false); err != nil {
			return pathErr("umount", dst, err)
		}
		return pathErr("umount", dst, syscall.EINVAL)
	}
	t := f.table()
	for i := len(t.made) - 1; i >= 0; i-- {
		rm := t.made[i]
		if rm.cpath != cp {
			continue
		}
		if rm.host != nil {
			if err := undoHostMount(rm.host); err != nil {
				return pathErr("umount", dst, err)
			}
		}
		if rm.mp != nil || rm.bind != "" {
			delete(f.mountAt, cp)
			delete(t.binds, cp)
			if rm.prevMP != nil {
				f.insertMount(rm.prevMP)
			} else {
				f.sortMounts()
			}
			if rm.prevBind != "" {
				t.binds[cp] = rm.prevBind
			}
		}
		t.made = append(t.made[:i], t.made[i+1:]...)
		return nil
	}
	if f.mountAt[cp] != nil {
		// A mount of the container's config: umount in the container hides
		// it from the container only.
		delete(f.mountAt, cp)
		f.sortMounts()
		return nil
	}
	return pathErr("umount", dst, syscall.EINVAL)
}

// HoldsKernelMounts reports whether the view holds, or may come to hold,
// kernel objects that Release must give back: private copies of host trees,
// or (a bidirectional mount) mounts its processes make on the host.
func (f *FS) HoldsKernelMounts() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.mtab != nil && (len(f.mtab.trees) > 0 || f.mtab.hostMade()) {
		return true
	}
	for _, m := range f.mounts {
		if m.prop == PropagationBidirectional {
			return true
		}
	}
	return false
}

func (t *mountTable) hostMade() bool { return t.hostMounts() > 0 }

func (t *mountTable) hostMounts() (n int) {
	for _, rm := range t.made {
		if rm.host != nil {
			n++
		}
	}
	return n
}

func (t *mountTable) hostCopyBytes() (n int64) {
	for _, rm := range t.made {
		n += rm.hostBytes
	}
	return n
}

// Release gives back what the view holds in the kernel (the container is
// removed): the mounts made on the host are detached, the private tree
// copies closed (in the background). The view's mounts fail with ENOENT
// afterwards.
func (f *FS) Release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mtab == nil || f.mtab.release {
		return nil
	}
	f.mtab.release = true
	var errs []error
	for i := len(f.mtab.made) - 1; i >= 0; i-- {
		if h := f.mtab.made[i].host; h != nil {
			errs = append(errs, undoHostMount(h))
		}
	}
	f.mtab.made = nil
	files := make([]*os.File, 0, len(f.mtab.trees))
	for _, t := range f.mtab.trees {
		files = append(files, t.file)
		t.file = nil
		f.mtab.budget.give()
	}
	if len(files) > 0 {
		// The kernel dissolves a detached tree on its last close after an RCU
		// grace period (0.1-0.6 ms here, mostly waiting): the caller
		// (RemoveContainer) does not wait for it.
		go func() {
			for _, file := range files {
				file.Close()
			}
		}()
	}
	return errors.Join(errs...)
}

// MountInfo is /proc/self/mountinfo as the container sees it: the root, /proc,
// each mount with the propagation Linux prints for it (shared:N for rshared,
// the host mount's peer group; master:N for rslave), and the mounts its
// processes made.
func (f *FS) MountInfo() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	host, _ := mountinfo.Read()
	var b strings.Builder
	ro := "rw"
	if f.cfg.ReadonlyRootfs {
		ro = "ro"
	}
	const rootID = 1000
	fmt.Fprintf(&b, "%d %d 0:40 / / %s,relatime - overlay overlay rw\n", rootID, rootID-1, ro)
	fmt.Fprintf(&b, "%d %d 0:41 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n", rootID+1, rootID)
	next := rootID + 2
	if f.sys != nil {
		// runc's /sys and, on a cgroup v2 node, the cgroup2 mount over its fs/cgroup (sysfs.go).
		fmt.Fprintf(&b, "%d %d 0:42 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n", next, rootID)
		fmt.Fprintf(&b, "%d %d 0:43 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n", next+1, next)
		next += 2
	}
	mounts := append([]*mountPoint(nil), f.mounts...)
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i].cpath) < len(mounts[j].cpath) })
	ids := map[string]int{"/": rootID}
	parent := func(cp string) int {
		for p := path.Dir(cp); ; p = path.Dir(p) {
			if id, ok := ids[p]; ok {
				return id
			}
			if p == "/" {
				return rootID
			}
		}
	}
	emit := func(m *mountPoint) {
		hostPath := path.Join(m.dir, m.sub, m.name)
		hm, _ := mountinfo.Lookup(host, hostPath)
		root := path.Join(hm.Root, strings.TrimPrefix(hostPath, hm.MountPoint))
		opt := "rw"
		if m.ro {
			opt = "ro"
		}
		var tag string
		switch m.prop {
		case PropagationBidirectional:
			if n := hm.Tag("shared"); n != 0 {
				tag = fmt.Sprintf(" shared:%d", n)
			}
		case PropagationHostToContainer:
			n := hm.Tag("shared")
			if n == 0 {
				n = hm.Tag("master")
			}
			if n != 0 {
				tag = fmt.Sprintf(" master:%d", n)
			}
		}
		dev, fstype, source, super := hm.Dev, hm.FSType, hm.Source, hm.SuperOpts
		if dev == "" {
			dev, fstype, source, super = "0:0", "none", "none", "rw"
		}
		fmt.Fprintf(&b, "%d %d %s %s %s %s,relatime%s - %s %s %s\n", next, parent(m.cpath), dev, mountinfo.Escape(root), mountinfo.Escape(m.cpath), opt, tag, fstype, mountinfo.Escape(source), super)
		ids[m.cpath] = next
		next++
	}
	for _, m := range mounts {
		emit(m)
	}
	if f.mtab != nil {
		for _, rm := range f.mtab.made {
			switch {
			case rm.host != nil:
				// Made on the host below a bidirectional mount: as the host's table has it.
				emit(&mountPoint{cpath: rm.cpath, dir: rm.hostPath, prop: PropagationBidirectional})
			case rm.bind != "":
				fmt.Fprintf(&b, "%d %d 0:40 %s %s rw,relatime - overlay overlay rw\n", next, parent(rm.cpath), mountinfo.Escape(rm.bind), mountinfo.Escape(rm.cpath))
				next++
			}
		}
	}
	return []byte(b.String())
}
