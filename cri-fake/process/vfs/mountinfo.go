package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Propagation is a mount's propagation type in the container (the CRI's
// MountPropagation): what crosses between the host's mount and the
// container's copy of it after the container starts.
type Propagation int

const (
	// PropagationPrivate (rprivate, the CRI default): nothing crosses. The
	// container keeps the mounts the host path had when its view was built.
	PropagationPrivate Propagation = iota
	// PropagationHostToContainer (rslave): mounts the host makes below the
	// host path appear in the container; the container's own stay inside.
	PropagationHostToContainer
	// PropagationBidirectional (rshared): both ways; what a privileged
	// container mounts below the path appears on the host as well.
	PropagationBidirectional
)

func (p Propagation) String() string {
	switch p {
	case PropagationHostToContainer:
		return "rslave"
	case PropagationBidirectional:
		return "rshared"
	}
	return "rprivate"
}

// HostMount is one line of the host's /proc/self/mountinfo (proc(5)).
type HostMount struct {
	ID, Parent int
	Dev        string // major:minor
	Root       string // the directory of the file system mounted here
	MountPoint string
	Options    string   // per-mount options (rw,relatime)
	Optional   []string // shared:N, master:N, propagate_from:N, unbindable
	FSType     string
	Source     string
	SuperOpts  string
}

// Tag is the value of the optional field name ("shared", "master"), or 0.
func (m HostMount) Tag(name string) int {
	for _, o := range m.Optional {
		if v, ok := strings.CutPrefix(o, name+":"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// ParseMountInfo parses /proc/<pid>/mountinfo; a line that is not one is
// skipped. Paths are unescaped (the kernel writes space, tab, newline and
// backslash as \ooo).
func ParseMountInfo(data []byte) []HostMount {
	var out []HostMount
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// id parent dev root point options [optional...] - fstype source superopts
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+3 {
			continue
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		m := HostMount{ID: id, Parent: parent, Dev: f[2], Root: unescapeMountInfo(f[3]), MountPoint: unescapeMountInfo(f[4]),
			Options: f[5], Optional: f[6:sep:sep], FSType: f[sep+1], Source: unescapeMountInfo(f[sep+2])}
		if len(f) > sep+3 {
			m.SuperOpts = f[sep+3]
		}
		out = append(out, m)
	}
	return out
}

// unescapeMountInfo undoes the kernel's \ooo escapes (fs/proc_namespace.c's
// mangle); anything else is kept as it is.
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeMountInfo is the kernel's mangle of a path for mountinfo.
func escapeMountInfo(s string) string {
	if !strings.ContainsAny(s, " \t\n\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ReadHostMounts is cri-fake's own mount table, the host's: the kernel's
// mountinfo of the calling thread (a test may run it in a mount namespace of
// one locked thread).
func ReadHostMounts() ([]HostMount, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	return ParseMountInfo(data), nil
}

// lookupHostMount is the mount a resolved host path lies on: the one with
// the longest mount point that is the path or one of its parents, the last
// of those when several are stacked there (the one on top). containerd's
// mount.Lookup picks the longest too, by plain string prefix.
func lookupHostMount(mounts []HostMount, p string) (HostMount, bool) {
	best, found := HostMount{}, false
	for _, m := range mounts {
		mp := m.MountPoint
		if !(p == mp || mp == "/" || strings.HasPrefix(p, mp+"/")) {
			continue
		}
		if !found || len(mp) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// CheckPropagation is containerd's check at CreateContainer
// (internal/cri/opts/spec_linux_opts.go, ensureShared and
// ensureSharedOrSlave): a bidirectional mount needs its host path on a
// shared mount, a host-to-container one on a shared or slave mount. The
// messages are containerd's.
func CheckPropagation(mounts []HostMount, hostPath string, p Propagation) error {
	if p == PropagationPrivate {
		return nil
	}
	src, err := filepath.EvalSymlinks(hostPath)
	if err != nil {
		return err
	}
	m, ok := lookupHostMount(mounts, src)
	if !ok {
		return fmt.Errorf("failed to find the mount point of %q", src)
	}
	if m.Tag("shared") != 0 {
		return nil
	}
	if p == PropagationBidirectional {
		return fmt.Errorf("path %q is mounted on %q but it is not a shared mount", src, m.MountPoint)
	}
	if m.Tag("master") != 0 {
		return nil
	}
	return fmt.Errorf("path %q is mounted on %q but it is not a shared or slave mount", src, m.MountPoint)
}
