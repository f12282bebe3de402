package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// mountPoint is a host mount as the FS serves it. Every host operation under
// it goes through an os.Root opened on dir, so no name the container gives —
// "..", a symlink, a symlink swapped in between a check and its use — reaches
// a file outside dir: the kernel's openat2(RESOLVE_BENEATH) guarantee, which
// os.Root provides. Symlinks found below dir are never followed by the host:
// resolve reads them and goes on in the container's view, as the kernel
// resolves a bind mount's symlinks inside the container's root.
type mountPoint struct {
	cpath     string // container path, symlinks resolved in the container's view (runc places mounts with securejoin)
	dir       string // host directory the operations are confined to: the mount source, or its parent for a file
	name      string // file mounts: the file's name in dir; "" for a directory mount
	ro        bool
	recursive bool   // read-only applies to file systems mounted below dir too
	dev, ino  uint64 // identity of dir when the mount was made
	prop      Propagation
	tree      *hostTree // rprivate: the private copy of the host tree operations go through (mounttable.go)
	sub       string    // a bind made in the container: the directory below dir (or tree) it shows
}

func (m *mountPoint) isDir() bool { return m.name == "" }

// rootRel is the mount point's own name below dir.
func (m *mountPoint) rootRel() string {
	if m.name == "" {
		return "."
	}
	return m.name
}

// open opens the root the mount's operations go through. A bind mount pins
// the directory it was made of; when the host path now names another
// directory (replaced, or swapped for a symlink by whoever can write its
// parent — possibly another mount of this container) the operations fail as
// in a deleted directory (ENOENT) rather than follow the new name.
func (m *mountPoint) open() (*os.Root, error) {
	r, err := m.openBase()
	if err != nil {
		return nil, err
	}
	st, err := r.Stat(".")
	if err == nil {
		if dev, ino, ok := identity(st); !ok || dev != m.dev || ino != m.ino || deleted(st) {
			err = syscall.ENOENT
		}
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func identity(st fs.FileInfo) (dev, ino uint64, ok bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(s.Dev), uint64(s.Ino), true
}

// hostRoots are the mount roots one FS operation has opened, at most one per
// mount; close releases them. The zero value is ready; an operation that
// touches no mount opens nothing.
type hostRoots struct {
	ms []*mountPoint
	rs []*os.Root
}

func (h *hostRoots) get(m *mountPoint) (*os.Root, error) {
	for i, x := range h.ms {
		if x == m {
			return h.rs[i], nil
		}
	}
	r, err := m.open()
	if err != nil {
		return nil, err
	}
	h.ms = append(h.ms, m)
	h.rs = append(h.rs, r)
	return r, nil
}

func (h *hostRoots) close() {
	for _, r := range h.rs {
		r.Close()
	}
	h.ms, h.rs = nil, nil
}

// coveringMount is the mount a resolved (symlink-free) container path lies
// in, with the path below the mount's dir; nil when it is in the container's
// own tree. f.mounts is longest path first, so the innermost mount wins.
func (f *FS) coveringMount(p string) (*mountPoint, string) {
	for _, m := range f.mounts {
		switch {
		case p == m.cpath:
			return m, m.rootRel()
		case m.cpath == "/":
			return m, p[1:]
		case strings.HasPrefix(p, m.cpath+"/") && m.isDir():
			return m, p[len(m.cpath)+1:]
		}
	}
	return nil, ""
}

// nested reports whether rel (below m's dir) lies on another file system
// mounted under it: its nearest existing ancestor has another device number
// than the mount's root. Only a non-recursive read-only mount asks.
func nested(r *os.Root, m *mountPoint, rel string) bool {
	if !m.isDir() {
		return false
	}
	for p := rel; ; p = path.Dir(p) {
		if st, err := r.Lstat(p); err == nil {
			dev, _, ok := identity(st)
			return ok && dev != m.dev
		}
		if p == "." || p == "/" {
			return false
		}
	}
}

// depth is the number of components of a container path (containerd orders
// mounts by it, so a mount is made before the ones below it).
func depth(p string) int { return strings.Count(path.Clean("/"+p), "/") }

// addMounts sets up cfg's mounts the way containerd and runc do: ordered by
// the depth of their destination, each host path resolved on the host (the
// mount source is trusted), each destination resolved inside the container's
// view as it is at that point (runc's securejoin: a symlink in the image or
// in an earlier mount is followed, and clamped at the container's root), and
// the mount point created where it is missing — in the container's own tree,
// or inside an earlier host mount through that mount's root.
func (f *FS) addMounts(mounts []Mount, add func(string, []byte)) error {
	if len(mounts) == 0 {
		return nil
	}
	ms := append([]Mount(nil), mounts...)
	sort.SliceStable(ms, func(i, j int) bool { return depth(ms[i].ContainerPath) < depth(ms[j].ContainerPath) })
	f.mountAt = map[string]*mountPoint{}
	var hostMounts []mountinfo.Mount
	for _, m := range ms {
		if m.ContainerPath == "" || !path.IsAbs(m.ContainerPath) {
			return fmt.Errorf("mount container path %q must be absolute", m.ContainerPath)
		}
		host, err := filepath.EvalSymlinks(m.HostPath)
		if err != nil {
			return fmt.Errorf("mount %q: host path %q: %w", m.ContainerPath, m.HostPath, err)
		}
		st, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("mount %q: host path %q: %w", m.ContainerPath, m.HostPath, err)
		}
		mp := &mountPoint{dir: host, ro: m.Readonly, recursive: m.RecursiveReadOnly}
		if !st.IsDir() {
			mp.dir, mp.name = filepath.Dir(host), filepath.Base(host)
			if st, err = os.Stat(mp.dir); err != nil {
				return fmt.Errorf("mount %q: host path %q: %w", m.ContainerPath, m.HostPath, err)
			}
		}
		var ok bool
		if mp.dev, mp.ino, ok = identity(st); !ok {
			return fmt.Errorf("mount %q: host path %q: no device and inode number", m.ContainerPath, m.HostPath)
		}
		if mp.cpath, err = f.mountDest(cleanAbs(m.ContainerPath), mp.isDir(), add); err != nil {
			return fmt.Errorf("mount %q: %w", m.ContainerPath, err)
		}
		if err := f.setPropagation(mp, m, &hostMounts); err != nil {
			return fmt.Errorf("mount %q: %w", m.ContainerPath, err)
		}
		f.insertMount(mp)
	}
	return nil
}

// mountDest resolves a mount destination in the container's view and makes
// sure the mount point exists there.
func (f *FS) mountDest(cp string, isDir bool, add func(string, []byte)) (string, error) {
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, cp, true, true)
	if err != nil {
		return "", pathErr("mount", cp, err)
	}
	if f.mountAt[l.cpath] != nil {
		return l.cpath, nil
	}
	if l.m != nil {
		// Inside an earlier host mount: runc creates the mount point in the
		// mount source, which a read-only bind refuses.
		if l.ro {
			return "", pathErr("mkdir", l.cpath, syscall.EROFS)
		}
		r, err := roots.get(l.m)
		if err != nil {
			return "", pathErr("mkdir", l.cpath, err)
		}
		if isDir {
			err = r.MkdirAll(l.rel, 0o755)
		} else if err = r.MkdirAll(path.Dir(l.rel), 0o755); err == nil {
			var file *os.File
			if file, err = r.OpenFile(l.rel, os.O_RDONLY|os.O_CREATE, 0o644); err == nil {
				file.Close()
			}
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", pathErr("mkdir", l.cpath, err)
		}
		return l.cpath, nil
	}
	// The mount point exists in the container's tree, as runc creates it.
	if isDir {
		f.ensureDirs(l.cpath)
	} else if _, ok := f.get(l.cpath); !ok {
		f.ensureDirs(path.Dir(l.cpath))
		add(l.cpath, nil)
	}
	return l.cpath, nil
}
