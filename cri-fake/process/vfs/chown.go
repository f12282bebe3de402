package vfs

import (
	"io/fs"
	"slices"
	"syscall"
)

// ChownAs changes path's owner and group as c (chown(2), lchown(2) when
// follow is false); -1 leaves one unchanged. Without CAP_CHOWN (c.Chown) only
// the file's owner may change it, and only its group, to one of its own
// groups: anything else is EPERM. A regular file loses its set-user-ID and
// set-group-ID bits, as Linux clears them on every chown. On a host mount the
// rule is checked against the host file's owner and the change is made by
// cri-fake on the host (as root, confined to the mount like every write).
func (f *FS) ChownAs(c Cred, p string, uid, gid int, follow bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, follow, false)
	if err != nil {
		return pathErr("chown", p, err)
	}
	if l.ro {
		return pathErr("chown", p, syscall.EROFS)
	}
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return pathErr("chown", p, err)
		}
		st, err := r.Lstat(l.rel)
		if err != nil {
			return pathErr("chown", p, err)
		}
		owner, group := -1, -1
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner, group = int(sys.Uid), int(sys.Gid)
		}
		if !c.mayChown(owner, group, uid, gid) {
			return pathErr("chown", p, syscall.EPERM)
		}
		// Root.Lchown never follows a symlink swapped in meanwhile; walk already
		// resolved the path in the container's view.
		return wrapNil("chown", p, r.Lchown(l.rel, uid, gid))
	case locProc, locDev, locMasked, locSys:
		return pathErr("chown", p, syscall.EPERM)
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return pathErr("chown", p, syscall.ENOENT)
	}
	if !c.mayChown(n.uid, n.gid, uid, gid) {
		return pathErr("chown", p, syscall.EPERM)
	}
	if n, err = f.ownedNode(l.cpath, true); err != nil {
		return pathErr("chown", p, err)
	}
	if uid >= 0 {
		n.uid = uid
	}
	if gid >= 0 {
		n.gid = gid
	}
	if n.mode.IsRegular() {
		n.mode &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return nil
}

// mayChown is chown(2)'s permission rule for a file owned by owner:group.
func (c Cred) mayChown(owner, group, uid, gid int) bool {
	if c.Chown {
		return true
	}
	if owner != c.UID || (uid >= 0 && uid != owner) {
		return false
	}
	return gid < 0 || gid == group || slices.Contains(c.GIDs, gid)
}
