package vfs

import (
	"bytes"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
)

// SysTree is what a container sees under /sys: sysfs, mounted read-only as containerd mounts it for a
// container (its OCI spec's default mounts), with the container's cgroup v2 tree at /sys/fs/cgroup
// (containerd's cgroup2 mount with a private cgroup namespace: the container's own cgroup is the root
// it sees). The kernel side of the simulation provides it (kernel/cgroupfs.go); the view only resolves
// paths into it. Paths are below /sys, without a leading slash ("fs/cgroup/cpu.max"); "" is /sys.
type SysTree interface {
	// ReadSys is the content of the file rel, false when there is none.
	ReadSys(rel string) ([]byte, bool)
	// ListSys is the entries of the directory rel, false when rel is no directory.
	ListSys(rel string) ([]string, bool)
}

// SetSys mounts t at /sys: from then on /sys is t's (the image's /sys, usually empty, is covered, as a
// mount covers what is below it). Without it /sys is the image's directory. A CRI mount below /sys still
// wins over t, as it is mounted over sysfs.
func (f *FS) SetSys(t SysTree) {
	f.mu.Lock()
	f.sys = t
	f.mu.Unlock()
}

// underSys reports whether the container path p is in the sysfs mount. Caller holds f.mu.
func (f *FS) underSys(p string) bool {
	return f.sys != nil && (p == "/sys" || strings.HasPrefix(p, "/sys/"))
}

// sysRel is p below /sys.
func sysRel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, "/sys"), "/") }

func (f *FS) sysIsDir(rel string) bool {
	_, ok := f.sys.ListSys(rel)
	return ok
}

// sysStat is stat(2) of a sysfs path: directories 0555 and files 0444, as for a container that is not
// privileged (a read-only mount; the kernel's own modes are 0755 and 0644, writes refused with EROFS),
// and size 0, as cgroup v2's files report it. A file exists when its directory lists it: the content
// is not asked for here, because the provider may read the view (memory.current counts the
// container's files) and the caller holds f.mu.
func (f *FS) sysStat(rel string) (fs.FileInfo, bool) {
	if rel == "" {
		return virtualInfo("sys", fs.ModeDir|0o555, 0), true
	}
	name := path.Base(rel)
	if f.sysIsDir(rel) {
		return virtualInfo(name, fs.ModeDir|0o555, 0), true
	}
	dir := path.Dir(rel)
	if dir == "." {
		dir = ""
	}
	names, _ := f.sys.ListSys(dir)
	if !slices.Contains(names, name) {
		return nil, false
	}
	return virtualInfo(name, 0o444, 0), true
}

// sysReader reads a sysfs file's content when first read, as the kernel produces an attribute at
// read(2): after Open has let go of f.mu.
type sysReader struct {
	sys SysTree
	rel string
	r   *bytes.Reader
}

func (s *sysReader) Read(b []byte) (int, error) {
	if s.r == nil {
		data, _ := s.sys.ReadSys(s.rel)
		s.r = bytes.NewReader(data)
	}
	return s.r.Read(b)
}

// sysReadDir lists a sysfs directory, sorted; false when rel is no directory.
func (f *FS) sysReadDir(rel string) ([]fs.FileInfo, bool) {
	names, ok := f.sys.ListSys(rel)
	if !ok {
		return nil, false
	}
	out := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		if st, ok := f.sysStat(path.Join(rel, n)); ok {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, true
}
