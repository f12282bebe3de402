package vfs

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

type locKind int

const (
	locMem locKind = iota
	locHost
	locProc
	locDev
	locMasked
	locSys // under /sys, the kernel's sysfs (sysfs.go)
)

// loc is where a container path lands after resolution.
type loc struct {
	kind  locKind
	cpath string      // resolved container path (no symlinks, no "..")
	m     *mountPoint // locHost (and a masked path in a mount): the mount
	rel   string      // locHost: path below m.dir; locProc: path below /proc; locSys: below /sys; locDev: device name
	ro    bool        // writes refused with EROFS
}

// Linux's limits on resolution (include/uapi/linux/limits.h, namei.c).
const (
	maxSymlinks = 40   // MAXSYMLINKS: following the 41st link fails with ELOOP
	pathMax     = 4096 // PATH_MAX, with the terminating NUL
	nameMax     = 255  // NAME_MAX: one component
)

// resolve is walk for callers outside an FS operation (realpath). Caller
// holds f.mu (read).
func (f *FS) resolve(p string, follow bool) (loc, error) {
	var roots hostRoots
	defer roots.close()
	return f.walk(&roots, p, follow, false)
}

// walk resolves p the way the kernel resolves a path in the container's
// mount namespace: component by component across the container's own tree,
// /proc, /dev and the host mounts; a symlink met on the way (the last
// component only when follow is set) is followed in the container's view
// wherever it lives — an absolute target starts again at the container's
// root, a relative one in the link's directory — and ".." goes to the parent
// of the directory reached so far, stopping at the container's root. Symlinks
// inside a host mount are read (Readlink through the mount's root), never
// followed by the host. More than maxSymlinks links give ELOOP.
//
// With lenient set (placing a mount), a missing component and what follows it
// are taken as directories to be created instead of failing. Caller holds
// f.mu; host roots opened on the way are left in roots for the operation.
func (f *FS) walk(roots *hostRoots, p string, follow, lenient bool) (loc, error) {
	if len(p) >= pathMax {
		return loc{}, syscall.ENAMETOOLONG
	}
	var w walkState
	f.enter(&w, "/")
	todo := p
	links, missing := 0, 0
	for {
		for len(todo) > 0 && todo[0] == '/' {
			todo = todo[1:]
		}
		if todo == "" {
			break
		}
		c, rest := todo, ""
		if i := strings.IndexByte(todo, '/'); i >= 0 {
			c, rest = todo[:i], todo[i:]
		}
		todo = rest
		// A trailing slash makes the kernel follow a last symlink and
		// require a directory; rest is then "/" or more slashes.
		last := strings.Trim(rest, "/") == ""
		followLast := follow || rest != ""
		switch c {
		case ".":
			continue
		case "..":
			if missing > 0 {
				missing--
				w.cur = path.Dir(w.cur)
				if w.m != nil {
					w.rel = path.Dir(w.rel)
				}
				continue
			}
			f.enter(&w, path.Dir(w.cur))
			continue
		}
		if len(c) > nameMax {
			return loc{}, syscall.ENAMETOOLONG
		}
		next := w.cur + "/" + c
		if w.cur == "/" {
			next = "/" + c
		}
		if f.mtab != nil && f.mtab.binds != nil && !w.bound {
			if src, ok := f.mtab.binds[next]; ok {
				// A bind of the container's own tree (mount --bind): the walk
				// goes on in its source, where, the bind being a copy of the
				// source's mount only, the binds are not (so a bind of / at
				// /x shows an empty /x/x, as in Linux, not itself again).
				f.enter(&w, src)
				w.bound = true
				missing = 0
				continue
			}
		}
		if mp := f.mountAt[next]; mp != nil {
			if !last && !mp.isDir() {
				return loc{}, syscall.ENOTDIR
			}
			w.cur, w.m, w.rel, w.proc, w.sys, missing = next, mp, mp.rootRel(), false, false, 0
			continue
		}
		if missing > 0 {
			w.cur = next
			if w.m != nil {
				w.rel = path.Join(w.rel, c)
			}
			missing++
			continue
		}
		var target string
		isLink := false
		if w.m != nil {
			r, err := roots.get(w.m)
			if err != nil {
				return loc{}, hostErrno(err)
			}
			rel := path.Join(w.rel, c)
			st, err := r.Lstat(rel)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					return loc{}, hostErrno(err)
				}
				if !last && !lenient {
					return loc{}, syscall.ENOENT
				}
				if !last {
					missing = 1
				}
				w.cur, w.rel = next, rel
				continue
			}
			if st.Mode()&fs.ModeSymlink != 0 && (!last || followLast) {
				if target, err = r.Readlink(rel); err != nil {
					return loc{}, hostErrno(err)
				}
				isLink = true
			} else {
				if !last && !st.IsDir() {
					return loc{}, syscall.ENOTDIR
				}
				w.cur, w.rel = next, rel
				continue
			}
		} else {
			if w.sys || (next == "/sys" && f.sys != nil) {
				// sysfs is mounted there: what exists below it is the kernel's to say.
				w.cur, w.sys = next, true
				continue
			}
			if w.proc || next == "/proc" {
				// /proc is virtual: what exists below it is for the operation to say.
				w.cur, w.proc = next, true
				continue
			}
			if w.cur == "/dev" && last && devices[c] {
				return f.finish(loc{kind: locDev, cpath: next, rel: c}), nil
			}
			n, ok := f.get(next)
			if !ok {
				if !last && !lenient {
					return loc{}, syscall.ENOENT
				}
				if !last {
					missing = 1
				}
				w.cur = next
				continue
			}
			if n.isSymlink() && (!last || followLast) {
				target, isLink = n.target, true
			} else {
				if !last && !n.isDir() {
					return loc{}, syscall.ENOTDIR
				}
				w.cur = next
				continue
			}
		}
		if isLink {
			if links++; links > maxSymlinks {
				return loc{}, syscall.ELOOP
			}
			if target == "" {
				return loc{}, syscall.ENOENT
			}
			if strings.HasPrefix(target, "/") {
				f.enter(&w, "/") // the container's root, never the host's
				w.bound = false
			}
			if todo != "" {
				target += "/" + todo
			}
			todo = target
		}
	}
	l := loc{kind: locMem, cpath: w.cur}
	switch {
	case w.m != nil:
		l = loc{kind: locHost, cpath: w.cur, m: w.m, rel: w.rel, ro: w.m.ro}
		if l.ro && !w.m.recursive {
			if r, err := roots.get(w.m); err == nil && nested(r, w.m, w.rel) {
				l.ro = false
			}
		}
	case w.proc:
		l = loc{kind: locProc, cpath: w.cur, rel: strings.TrimPrefix(strings.TrimPrefix(w.cur, "/proc"), "/")}
	case w.sys:
		l = loc{kind: locSys, cpath: w.cur, rel: sysRel(w.cur)}
	}
	return f.finish(l), nil
}

// walkState is where a walk stands: a resolved container directory and, when
// it lies in a host mount, that mount and the path below its dir.
type walkState struct {
	cur   string
	m     *mountPoint
	rel   string
	proc  bool // under /proc (not a mount)
	sys   bool // under /sys (not a mount below it)
	bound bool // inside a bind of the container's own tree (mounttable.go)
}

// enter moves the walk to the resolved container path p.
func (f *FS) enter(w *walkState, p string) {
	w.cur = p
	w.m, w.rel = f.coveringMount(p)
	w.proc = w.m == nil && (p == "/proc" || strings.HasPrefix(p, "/proc/"))
	w.sys = w.m == nil && f.underSys(p)
}

// hostErrno is the errno of a failed host operation; a failure without one
// (os.Root's "path escapes from parent", possible only when a symlink was
// swapped in during the operation) is EACCES: refused.
func hostErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EACCES
}

func (f *FS) finish(l loc) loc {
	if f.underPrefix(f.cfg.MaskedPaths, l.cpath) {
		l.kind = locMasked
		l.ro = true
		return l
	}
	if l.kind == locMem && (f.cfg.ReadonlyRootfs || (len(f.images) > 0 && f.underImageVolume(l.cpath))) {
		l.ro = true
	}
	if l.kind == locProc || l.kind == locSys || f.underPrefix(f.cfg.ReadonlyPaths, l.cpath) {
		l.ro = true
	}
	return l
}

// Realpath is where p leads in the container's view once every symlink is
// followed (realpath(3)).
func (f *FS) Realpath(p string) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return "", err
	}
	return l.cpath, nil
}
