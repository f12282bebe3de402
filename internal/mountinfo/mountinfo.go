// Package mountinfo reads the kernel's mount tables (/proc/<pid>/mountinfo):
// what cri-fake checks a mount's propagation against, as containerd does, and
// what the cluster harness looks for before removing a directory.
package mountinfo

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file (proc(5)).
type Mount struct {
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
func (m Mount) Tag(name string) int {
	for _, o := range m.Optional {
		if v, ok := strings.CutPrefix(o, name+":"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// Parse parses /proc/<pid>/mountinfo; a line that is not one is skipped.
// Paths are unescaped (the kernel writes space, tab, newline and backslash as
// \ooo).
func Parse(data []byte) []Mount {
	var out []Mount
	for _, line := range strings.Split(string(data), "\n") {
		// The kernel separates the fields with one space and escapes only
		// space, tab, newline and backslash in paths: other white space (a
		// form feed, a carriage return) is part of a field.
		f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' })
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
		m := Mount{ID: id, Parent: parent, Dev: f[2], Root: Unescape(f[3]), MountPoint: Unescape(f[4]),
			Options: f[5], Optional: f[6:sep:sep], FSType: f[sep+1], Source: Unescape(f[sep+2])}
		if len(f) > sep+3 {
			m.SuperOpts = f[sep+3]
		}
		out = append(out, m)
	}
	return out
}

// Unescape undoes the kernel's \ooo escapes (fs/proc_namespace.c's mangle);
// anything else is kept as it is.
func Unescape(s string) string {
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

// Escape is the kernel's mangle of a path for mountinfo.
func Escape(s string) string {
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

// Read is the mount table of the calling thread's mount namespace (a test
// may run in a namespace of one locked thread; a process's threads share
// one otherwise).
func Read() ([]Mount, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	return Parse(data), nil
}

// Lookup is the mount a resolved path lies on: the one with the longest
// mount point that is the path or one of its parents, the last of those when
// several are stacked there (the one on top). containerd's mount.Lookup picks
// the longest too, by plain string prefix.
func Lookup(mounts []Mount, p string) (Mount, bool) {
	best, found := Mount{}, false
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
