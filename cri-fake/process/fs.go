package process

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Mount maps a container path onto a REAL host path: reads and writes under
// ContainerPath go to HostPath on the host, as a bind mount would. A symlinked
// HostPath is resolved when the file system is built, like runc resolves the
// mount source before bind-mounting it.
type Mount struct {
	ContainerPath string
	HostPath      string
	Readonly      bool
	// RecursiveReadOnly makes mounts nested under HostPath read-only too.
	// Without it a read-only bind mount is read-only only for its own file
	// system: a file system mounted below HostPath stays writable, as the
	// kernel's non-recursive MS_RDONLY bind does.
	RecursiveReadOnly bool
}

// User is an /etc/passwd entry of the image.
type User struct {
	Name  string
	UID   int
	GID   int
	Home  string
	Shell string
}

// Group is an /etc/group entry of the image.
type Group struct {
	Name    string
	GID     int
	Members []string
}

// DNSConfig is the sandbox's DNS configuration (runtime.v1 DNSConfig), written to
// /etc/resolv.conf the way containerd writes the sandbox resolv.conf.
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// FSConfig describes a container's file system view.
type FSConfig struct {
	// Image is the image content; nil means BaseLayer("busybox").
	Image *Layer
	// Users and Groups are added to the standard busybox entries (root, daemon,
	// nobody, ...) in the generated /etc/passwd and /etc/group.
	Users  []User
	Groups []Group
	// Hostname goes to /etc/hostname and /proc/sys/kernel/hostname.
	Hostname string
	// IPs are the pod IPs, listed against the hostname in /etc/hosts.
	IPs []string
	// DNS builds /etc/resolv.conf; nil copies the host's /etc/resolv.conf, as
	// containerd does for a sandbox without DNS config.
	DNS *DNSConfig
	// Sysctls ("kernel.shm_rmid_forced" or "kernel/shm_rmid_forced" -> "1") are
	// readable under /proc/sys.
	Sysctls map[string]string
	// ReadonlyRootfs makes every write outside a writable mount fail with EROFS.
	ReadonlyRootfs bool
	Mounts         []Mount
	// MaskedPaths read as /dev/null (files) or an empty read-only directory;
	// ReadonlyPaths refuse writes (EROFS), as runc applies them.
	MaskedPaths   []string
	ReadonlyPaths []string
}

type mountPoint struct {
	cpath     string // clean container path
	host      string // resolved host path
	ro        bool
	recursive bool   // read-only applies to nested mounts too
	dev       uint64 // device of host, to recognise nested mounts
}

// FS is one container's file system: an in-memory overlay over the image content
// (the writable layer is the container's own copy-on-write map), synthetic /etc
// files, a virtual /proc and /dev, and host-backed mounts. It is safe for
// concurrent use.
type FS struct {
	mu sync.RWMutex
	// lower is the shared, read-only image content; upper holds what this
	// container created or changed, whiteout what it removed from lower
	// (an overlay, so thousands of containers share one image layer).
	lower    *Layer
	upper    map[string]*node
	whiteout map[string]bool
	owned    map[*node]bool // nodes this FS created and may mutate in place
	mounts   []mountPoint   // longest container path first
	cfg      FSConfig
	sysctls  map[string]string
	written  int64
	// proc answers reads under /proc other than /proc/sys (set by the container,
	// which owns the process table). rel is the path below /proc.
	proc func(rel string) ([]byte, bool)
	// procList lists directory entries under /proc (pids).
	procList func() []string
}

// NewFS builds a container file system from cfg.
func NewFS(cfg FSConfig) (*FS, error) {
	img := cfg.Image
	if img == nil {
		img = BaseLayer("busybox")
	}
	f := &FS{lower: img, upper: map[string]*node{}, whiteout: map[string]bool{}, owned: map[*node]bool{}, cfg: cfg, sysctls: map[string]string{}}
	now := time.Now()
	add := func(p string, data []byte) {
		f.ensureDirs(path.Dir(p))
		// Generated files belong to the image side: a write copies them up.
		f.set(p, &node{mode: 0o644, data: data, mtime: now})
	}
	if img != nil && len(img.entries) > 1 {
		if len(cfg.Users) == 0 && len(cfg.Groups) == 0 {
			img.etcOnce.Do(func() { img.passwd, img.group = passwdFile(img, nil), groupFile(img, nil) })
			// Shared bytes: a write replaces a node's data, never edits it in place
			// (ownedNode copies it first).
			add("/etc/passwd", img.passwd)
			add("/etc/group", img.group)
		} else {
			add("/etc/passwd", passwdFile(img, cfg.Users))
			add("/etc/group", groupFile(img, cfg.Groups))
		}
		host := cfg.Hostname
		if host == "" {
			host = "localhost"
		}
		add("/etc/hostname", []byte(host+"\n"))
		add("/etc/hosts", hostsFile(host, cfg.IPs))
		add("/etc/resolv.conf", resolvConf(cfg.DNS))
	}
	for k, v := range defaultSysctls {
		f.sysctls[k] = v
	}
	if cfg.Hostname != "" {
		f.sysctls["kernel/hostname"] = cfg.Hostname
	}
	for k, v := range cfg.Sysctls {
		f.sysctls[strings.ReplaceAll(k, ".", "/")] = v
	}
	for _, m := range cfg.Mounts {
		if m.ContainerPath == "" || !path.IsAbs(m.ContainerPath) {
			return nil, fmt.Errorf("mount container path %q must be absolute", m.ContainerPath)
		}
		host, err := filepath.EvalSymlinks(m.HostPath)
		if err != nil {
			return nil, fmt.Errorf("mount %q: host path %q: %w", m.ContainerPath, m.HostPath, err)
		}
		cp := path.Clean(m.ContainerPath)
		f.mounts = append(f.mounts, mountPoint{cpath: cp, host: host, ro: m.Readonly, recursive: m.RecursiveReadOnly, dev: deviceOf(host)})
		// The mount point exists in the container's tree, as runc creates it.
		if st, err := os.Stat(host); err == nil {
			if st.IsDir() {
				f.ensureDirs(cp)
			} else if _, ok := f.get(cp); !ok {
				f.ensureDirs(path.Dir(cp))
				add(cp, nil)
			}
		}
	}
	sort.SliceStable(f.mounts, func(i, j int) bool { return len(f.mounts[i].cpath) > len(f.mounts[j].cpath) })
	return f, nil
}

// defaultSysctls are what a fresh network and IPC namespace shows for the
// sysctls workloads commonly read.
var defaultSysctls = map[string]string{
	"kernel/shm_rmid_forced":              "0",
	"kernel/pid_max":                      "4194304",
	"kernel/ostype":                       "Linux",
	"net/ipv4/ip_forward":                 "1",
	"net/ipv4/ip_unprivileged_port_start": "0",
	"net/ipv4/ping_group_range":           "0\t2147483647",
	"net/core/somaxconn":                  "4096",
	"fs/mqueue/msg_max":                   "10",
	"vm/overcommit_memory":                "0",
}

// get, lookup, set, del and all read and write the overlay. Caller holds f.mu.
func (f *FS) get(p string) (*node, bool) {
	if n, ok := f.upper[p]; ok {
		return n, true
	}
	if f.whiteout[p] {
		return nil, false
	}
	n, ok := f.lower.entries[p]
	return n, ok
}

func (f *FS) lookup(p string) *node {
	n, _ := f.get(p)
	return n
}

func (f *FS) set(p string, n *node) {
	f.upper[p] = n
	delete(f.whiteout, p)
}

func (f *FS) del(p string) {
	delete(f.upper, p)
	if _, ok := f.lower.entries[p]; ok {
		f.whiteout[p] = true
	}
}

// all is the merged view (a fresh map: used by listings, removals, renames).
func (f *FS) all() map[string]*node {
	out := make(map[string]*node, len(f.lower.entries)+len(f.upper))
	for p, n := range f.lower.entries {
		if !f.whiteout[p] {
			out[p] = n
		}
	}
	for p, n := range f.upper {
		out[p] = n
	}
	return out
}

func (f *FS) ensureDirs(p string) {
	p = cleanAbs(p)
	if n, ok := f.get(p); ok && (n.isDir() || n.isSymlink()) {
		return
	}
	if p != "/" {
		f.ensureDirs(path.Dir(p))
	}
	n := &node{mode: fs.ModeDir | 0o755, mtime: time.Now()}
	f.set(p, n)
	f.owned[n] = true
}

var standardUsers = []User{
	{"root", 0, 0, "/root", "/bin/sh"},
	{"daemon", 1, 1, "/usr/sbin", "/bin/false"},
	{"bin", 2, 2, "/bin", "/bin/false"},
	{"sys", 3, 3, "/dev", "/bin/false"},
	{"sync", 4, 100, "/bin", "/bin/sync"},
	{"mail", 8, 8, "/var/spool/mail", "/bin/false"},
	{"www-data", 33, 33, "/var/www", "/bin/false"},
	{"operator", 37, 37, "/var", "/bin/false"},
	{"nobody", 65534, 65534, "/home", "/bin/false"},
}

var standardGroups = []Group{
	{"root", 0, nil}, {"daemon", 1, nil}, {"bin", 2, nil}, {"sys", 3, nil}, {"adm", 4, nil},
	{"tty", 5, nil}, {"disk", 6, nil}, {"lp", 7, nil}, {"mail", 8, nil}, {"kmem", 9, nil},
	{"wheel", 10, []string{"root"}}, {"floppy", 11, nil}, {"audio", 12, nil}, {"dialout", 20, nil},
	{"www-data", 33, nil}, {"operator", 37, nil}, {"staff", 50, nil}, {"users", 100, nil},
	{"nogroup", 65534, nil},
}

func passwdFile(img *Layer, extra []User) []byte {
	var b bytes.Buffer
	seen := map[string]bool{}
	write := func(u User) {
		if seen[u.Name] {
			return
		}
		seen[u.Name] = true
		home, sh := u.Home, u.Shell
		if home == "" {
			home = "/home/" + u.Name
		}
		if sh == "" {
			sh = "/bin/sh"
		}
		fmt.Fprintf(&b, "%s:x:%d:%d:%s:%s:%s\n", u.Name, u.UID, u.GID, u.Name, home, sh)
	}
	for _, u := range extra { // image users win over the standard ones of the same name
		write(u)
	}
	for _, u := range standardUsers {
		write(u)
	}
	if img.entries["/usr/sbin/nginx"] != nil {
		write(User{"nginx", 101, 101, "/var/cache/nginx", "/sbin/nologin"})
	}
	return b.Bytes()
}

func groupFile(img *Layer, extra []Group) []byte {
	var b bytes.Buffer
	seen := map[string]bool{}
	write := func(g Group) {
		if seen[g.Name] {
			return
		}
		seen[g.Name] = true
		fmt.Fprintf(&b, "%s:x:%d:%s\n", g.Name, g.GID, strings.Join(g.Members, ","))
	}
	for _, g := range extra {
		write(g)
	}
	for _, g := range standardGroups {
		write(g)
	}
	if img.entries["/usr/sbin/nginx"] != nil {
		write(Group{"nginx", 101, nil})
	}
	return b.Bytes()
}

func hostsFile(host string, ips []string) []byte {
	var b bytes.Buffer
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		fmt.Fprintf(&b, "%s\t%s\n", ip, host)
	}
	return b.Bytes()
}

func resolvConf(d *DNSConfig) []byte {
	if d == nil {
		if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			return b
		}
		return nil
	}
	var b bytes.Buffer
	// Same layout as containerd's sandbox resolv.conf (internal/cri/server/sandbox_run_linux.go).
	if len(d.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(d.Searches, " "))
	}
	for _, s := range d.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(d.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(d.Options, " "))
	}
	return b.Bytes()
}

// cred is who performs a file operation. Only writes are permission checked:
// enough to make a non-root user fail where busybox would, without pretending to
// be a full DAC implementation.
type cred struct {
	uid  int
	gids []int
	// dacOverride is CAP_DAC_OVERRIDE: root and privileged processes bypass checks.
	dacOverride bool
}

var rootCred = cred{dacOverride: true}

type locKind int

const (
	locMem locKind = iota
	locHost
	locProc
	locDev
	locMasked
)

// loc is where a container path lands after resolution.
type loc struct {
	kind  locKind
	cpath string // resolved container path
	host  string // locHost: the host path
	ro    bool   // writes refused with EROFS
	rel   string // locProc: path below /proc; locDev: device name
}

func pathErr(op, p string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &fs.PathError{Op: op, Path: p, Err: errno}
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

var devices = map[string]bool{"null": true, "zero": true, "random": true, "urandom": true, "full": true, "tty": true, "stdout": true, "stderr": true, "stdin": true}

func (f *FS) mountFor(p string) (mountPoint, string, bool) {
	for _, m := range f.mounts {
		if p == m.cpath {
			return m, m.host, true
		}
		if strings.HasPrefix(p, m.cpath+"/") || m.cpath == "/" {
			return m, filepath.Join(m.host, strings.TrimPrefix(p, m.cpath)), true
		}
	}
	return mountPoint{}, "", false
}

func (f *FS) underPrefix(list []string, p string) bool {
	for _, q := range list {
		q = path.Clean(q)
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// deviceOf is the device number of the file system holding p (0 if unknown).
func deviceOf(p string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0
	}
	return uint64(st.Dev)
}

// nestedMount reports whether host (below m's host path) lies on another
// file system mounted under it: its nearest existing ancestor has another
// device number than the mount's root.
func nestedMount(m mountPoint, host string) bool {
	for p := host; len(p) > len(m.host); p = filepath.Dir(p) {
		if d := deviceOf(p); d != 0 {
			return d != m.dev
		}
	}
	return false
}

// resolve walks p through the in-memory tree, following symlinks (the last
// component only when follow is set), and stops at a mount, /proc or a device.
// Caller holds f.mu (read).
func (f *FS) resolve(p string, follow bool) (loc, error) {
	p = cleanAbs(p)
	for hops := 0; hops < 40; hops++ {
		restart := ""
		comps := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		if p == "/" {
			comps = nil
		}
		for i, c := range comps {
			next := path.Join(cur, c)
			last := i == len(comps)-1
			if m, host, ok := f.mountFor(next); ok && (next == m.cpath) {
				rest := strings.Join(comps[i+1:], "/")
				full := path.Join(next, rest)
				if rest != "" {
					host = filepath.Join(host, rest)
				}
				return f.finish(loc{kind: locHost, cpath: full, host: host, ro: m.ro && (m.recursive || !nestedMount(m, host))}), nil
			}
			if next == "/proc" {
				rest := strings.Join(comps[i+1:], "/")
				return f.finish(loc{kind: locProc, cpath: path.Join(next, rest), rel: rest}), nil
			}
			if cur == "/dev" && last && devices[c] {
				if _, _, ok := f.mountFor(next); !ok {
					return f.finish(loc{kind: locDev, cpath: next, rel: c}), nil
				}
			}
			n, ok := f.get(next)
			if !ok {
				if last {
					return f.finish(loc{kind: locMem, cpath: next}), nil
				}
				return loc{}, syscall.ENOENT
			}
			if n.isSymlink() && (!last || follow) {
				t := n.target
				if !path.IsAbs(t) {
					t = path.Join(cur, t)
				}
				restart = path.Join(t, strings.Join(comps[i+1:], "/"))
				break
			}
			if !last && !n.isDir() {
				return loc{}, syscall.ENOTDIR
			}
			cur = next
		}
		if restart == "" {
			return f.finish(loc{kind: locMem, cpath: path.Clean(cur)}), nil
		}
		p = cleanAbs(restart)
	}
	return loc{}, syscall.ELOOP
}

func (f *FS) finish(l loc) loc {
	if f.underPrefix(f.cfg.MaskedPaths, l.cpath) {
		l.kind = locMasked
		l.ro = true
		return l
	}
	if l.kind == locMem && f.cfg.ReadonlyRootfs {
		l.ro = true
	}
	if l.kind == locProc || f.underPrefix(f.cfg.ReadonlyPaths, l.cpath) {
		l.ro = true
	}
	return l
}

type memInfo struct {
	name string
	n    *node
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.n.data)) }
func (i memInfo) Mode() fs.FileMode  { return i.n.mode }
func (i memInfo) ModTime() time.Time { return i.n.mtime }
func (i memInfo) IsDir() bool        { return i.n.isDir() }
func (i memInfo) Sys() any           { return &Owner{UID: i.n.uid, GID: i.n.gid} }

// Owner is the Sys() value of a FileInfo from the in-memory layers.
type Owner struct{ UID, GID int }

func virtualInfo(name string, mode fs.FileMode, size int) fs.FileInfo {
	return memInfo{name: name, n: &node{mode: mode, data: make([]byte, size), mtime: time.Now()}}
}

func (f *FS) stat(p string, follow bool) (fs.FileInfo, loc, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, follow)
	if err != nil {
		return nil, l, pathErr("stat", p, err)
	}
	name := path.Base(l.cpath)
	switch l.kind {
	case locHost:
		var st fs.FileInfo
		if follow {
			st, err = os.Stat(l.host)
		} else {
			st, err = os.Lstat(l.host)
		}
		if err != nil {
			return nil, l, pathErr("stat", p, err)
		}
		return st, l, nil
	case locDev:
		return virtualInfo(name, fs.ModeDevice|fs.ModeCharDevice|0o666, 0), l, nil
	case locMasked:
		if n, ok := f.get(l.cpath); ok && n.isDir() {
			return virtualInfo(name, fs.ModeDir|0o755, 0), l, nil
		}
		return virtualInfo(name, fs.ModeDevice|fs.ModeCharDevice|0o666, 0), l, nil
	case locProc:
		if l.rel == "" || f.procIsDir(l.rel) {
			return virtualInfo(name, fs.ModeDir|0o555, 0), l, nil
		}
		data, ok := f.procRead(l.rel)
		if !ok {
			return nil, l, pathErr("stat", p, syscall.ENOENT)
		}
		return virtualInfo(name, 0o444, len(data)), l, nil
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return nil, l, pathErr("stat", p, syscall.ENOENT)
	}
	return memInfo{name: name, n: n}, l, nil
}

// Stat returns file information, following symlinks.
func (f *FS) Stat(p string) (fs.FileInfo, error) {
	st, _, err := f.stat(p, true)
	return st, err
}

// Lstat returns file information without following a final symlink.
func (f *FS) Lstat(p string) (fs.FileInfo, error) {
	st, _, err := f.stat(p, false)
	return st, err
}

func (f *FS) procIsDir(rel string) bool {
	if rel == "sys" || strings.HasPrefix(rel, "sys/") {
		k := strings.TrimPrefix(strings.TrimPrefix(rel, "sys"), "/")
		if _, ok := f.sysctls[k]; ok {
			return false
		}
		for key := range f.sysctls {
			if k == "" || strings.HasPrefix(key, k+"/") {
				return true
			}
		}
		return false
	}
	if rel == "self" || rel == "net" {
		return true
	}
	if f.proc != nil {
		if _, ok := f.proc(rel + "/"); ok {
			return true
		}
	}
	return false
}

func (f *FS) procRead(rel string) ([]byte, bool) {
	if strings.HasPrefix(rel, "sys/") {
		v, ok := f.sysctls[strings.TrimPrefix(rel, "sys/")]
		if !ok {
			return nil, false
		}
		return []byte(v + "\n"), true
	}
	if f.proc != nil {
		return f.proc(rel)
	}
	return nil, false
}

// ReadFile returns a file's content.
func (f *FS) ReadFile(p string) ([]byte, error) {
	rc, err := f.Open(p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// Open opens a file for reading. /dev/zero and /dev/urandom are endless.
func (f *FS) Open(p string) (io.ReadCloser, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	switch l.kind {
	case locHost:
		st, err := os.Stat(l.host)
		if err == nil && st.IsDir() {
			return nil, pathErr("read", p, syscall.EISDIR)
		}
		file, err := os.Open(l.host)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		return file, nil
	case locDev:
		switch l.rel {
		case "zero", "urandom", "random":
			return io.NopCloser(zeroReader{}), nil
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	case locMasked:
		if n, ok := f.get(l.cpath); ok && n.isDir() {
			return nil, pathErr("read", p, syscall.EISDIR)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	case locProc:
		if l.rel == "" || f.procIsDir(l.rel) {
			return nil, pathErr("read", p, syscall.EISDIR)
		}
		data, ok := f.procRead(l.rel)
		if !ok {
			return nil, pathErr("open", p, syscall.ENOENT)
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return nil, pathErr("open", p, syscall.ENOENT)
	}
	if n.isDir() {
		return nil, pathErr("read", p, syscall.EISDIR)
	}
	return io.NopCloser(bytes.NewReader(append([]byte(nil), n.data...))), nil
}

// ReadDir lists a directory, sorted by name.
func (f *FS) ReadDir(p string) ([]fs.FileInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	var out []fs.FileInfo
	switch l.kind {
	case locHost:
		ents, err := os.ReadDir(l.host)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		for _, e := range ents {
			if st, err := e.Info(); err == nil {
				out = append(out, st)
			}
		}
		return out, nil
	case locMasked:
		return nil, nil
	case locDev:
		return nil, pathErr("open", p, syscall.ENOTDIR)
	case locProc:
		names := map[string]bool{}
		if l.rel == "" {
			names["sys"], names["self"] = true, true
			if f.procList != nil {
				for _, n := range f.procList() {
					names[n] = true
				}
			}
		} else if strings.HasPrefix(l.rel+"/", "sys/") {
			k := strings.TrimPrefix(strings.TrimPrefix(l.rel, "sys"), "/")
			for key := range f.sysctls {
				if k == "" || strings.HasPrefix(key, k+"/") {
					rest := strings.TrimPrefix(strings.TrimPrefix(key, k), "/")
					names[strings.SplitN(rest, "/", 2)[0]] = true
				}
			}
		} else if f.procIsDir(l.rel) {
			for _, n := range []string{"cmdline", "status", "environ"} {
				names[n] = true
			}
		} else {
			return nil, pathErr("open", p, syscall.ENOTDIR)
		}
		for n := range names {
			rel := path.Join(l.rel, n)
			if f.procIsDir(rel) {
				out = append(out, virtualInfo(n, fs.ModeDir|0o555, 0))
			} else {
				out = append(out, virtualInfo(n, 0o444, 0))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
		return out, nil
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return nil, pathErr("open", p, syscall.ENOENT)
	}
	if !n.isDir() {
		return nil, pathErr("open", p, syscall.ENOTDIR)
	}
	prefix := l.cpath + "/"
	if l.cpath == "/" {
		prefix = "/"
	}
	seen := map[string]bool{}
	for q, c := range f.all() {
		if q == "/" || !strings.HasPrefix(q, prefix) || strings.Contains(q[len(prefix):], "/") {
			continue
		}
		seen[q[len(prefix):]] = true
		out = append(out, memInfo{name: q[len(prefix):], n: c})
	}
	// Mount points not yet in the tree still show up in their parent.
	for _, m := range f.mounts {
		if path.Dir(m.cpath) == l.cpath && !seen[path.Base(m.cpath)] {
			out = append(out, virtualInfo(path.Base(m.cpath), fs.ModeDir|0o755, 0))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// canWrite reports whether c may create or remove entries in dir n / write file n.
func (c cred) canWrite(n *node) bool {
	if c.dacOverride || n == nil {
		return true
	}
	perm := n.mode.Perm()
	if n.uid == c.uid {
		return perm&0o200 != 0
	}
	for _, g := range c.gids {
		if g == n.gid {
			return perm&0o020 != 0
		}
	}
	return perm&0o002 != 0
}

// writableParent checks that the parent directory of a memory path exists and
// may be written. Caller holds f.mu.
func (f *FS) writableParent(c cred, l loc) error {
	if l.ro {
		return syscall.EROFS
	}
	parent, ok := f.get(path.Dir(l.cpath))
	if !ok {
		return syscall.ENOENT
	}
	if !parent.isDir() {
		return syscall.ENOTDIR
	}
	if !c.canWrite(parent) {
		return syscall.EACCES
	}
	return nil
}

func (f *FS) newNode(c cred, mode fs.FileMode) *node {
	n := &node{mode: mode, uid: c.uid, mtime: time.Now()}
	if len(c.gids) > 0 {
		n.gid = c.gids[0]
	}
	f.owned[n] = true
	return n
}

// ownedNode returns a node at p that this FS may mutate, copying a shared one.
func (f *FS) ownedNode(p string) *node {
	n := f.lookup(p)
	if n == nil || f.owned[n] {
		return n
	}
	n = n.clone()
	f.owned[n] = true
	f.set(p, n)
	f.written += int64(len(n.data)) // an overlay copy-up lands in the upper layer
	return n
}

// memWriter appends to an in-memory file.
type memWriter struct {
	f *FS
	p string
	n *node
}

func (w *memWriter) Write(b []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.n.data = append(w.n.data, b...)
	w.n.mtime = time.Now()
	w.f.written += int64(len(b))
	return len(b), nil
}

func (w *memWriter) Close() error { return nil }

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }
func (e errWriter) Close() error              { return nil }

func (f *FS) openWrite(c cred, p string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	switch l.kind {
	case locDev:
		if l.rel == "full" {
			return errWriter{syscall.ENOSPC}, nil
		}
		return discard{}, nil
	case locMasked:
		if n, ok := f.get(l.cpath); ok && n.isDir() {
			return nil, pathErr("open", p, syscall.EISDIR)
		}
		return discard{}, nil // a masked file is /dev/null
	case locProc:
		return nil, pathErr("open", p, syscall.EROFS)
	case locHost:
		if l.ro {
			return nil, pathErr("open", p, syscall.EROFS)
		}
		flag := os.O_WRONLY | os.O_CREATE
		if appendMode {
			flag |= os.O_APPEND
		} else {
			flag |= os.O_TRUNC
		}
		file, err := os.OpenFile(l.host, flag, perm)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		return file, nil
	}
	n, ok := f.get(l.cpath)
	if ok && n.isDir() {
		return nil, pathErr("open", p, syscall.EISDIR)
	}
	if l.ro {
		return nil, pathErr("open", p, syscall.EROFS)
	}
	if ok {
		if !c.canWrite(n) {
			return nil, pathErr("open", p, syscall.EACCES)
		}
		n = f.ownedNode(l.cpath)
		if !appendMode {
			f.written -= int64(len(n.data))
			n.data = nil
		}
		n.mtime = time.Now()
		return &memWriter{f: f, p: l.cpath, n: n}, nil
	}
	if err := f.writableParent(c, l); err != nil {
		return nil, pathErr("open", p, err)
	}
	n = f.newNode(c, perm.Perm())
	f.set(l.cpath, n)
	return &memWriter{f: f, p: l.cpath, n: n}, nil
}

// OpenWrite opens p for writing (creating it with perm), truncating it unless
// appendMode is set.
func (f *FS) OpenWrite(p string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	return f.openWrite(rootCred, p, appendMode, perm)
}

func (f *FS) writeFile(c cred, p string, data []byte, perm fs.FileMode) error {
	w, err := f.openWrite(c, p, false, perm)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return pathErr("write", p, err)
	}
	return w.Close()
}

// WriteFile replaces p's content.
func (f *FS) WriteFile(p string, data []byte, perm fs.FileMode) error {
	return f.writeFile(rootCred, p, data, perm)
}

func (f *FS) touch(c cred, p string) error {
	f.mu.Lock()
	l, err := f.resolve(p, true)
	if err == nil && l.kind == locMem {
		if n, ok := f.get(l.cpath); ok {
			if l.ro {
				f.mu.Unlock()
				return pathErr("touch", p, syscall.EROFS)
			}
			if !c.canWrite(n) {
				f.mu.Unlock()
				return pathErr("touch", p, syscall.EACCES)
			}
			f.ownedNode(l.cpath).mtime = time.Now()
			f.mu.Unlock()
			return nil
		}
	}
	if err == nil && l.kind == locHost {
		f.mu.Unlock()
		if _, serr := os.Stat(l.host); serr == nil {
			if l.ro {
				return pathErr("touch", p, syscall.EROFS)
			}
			now := time.Now()
			return pathErr("touch", p, os.Chtimes(l.host, now, now))
		}
	} else {
		f.mu.Unlock()
	}
	w, err := f.openWrite(c, p, true, 0o644)
	if err != nil {
		return err
	}
	return w.Close()
}

func (f *FS) mkdir(c cred, p string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, false)
	if err != nil {
		return pathErr("mkdir", p, err)
	}
	switch l.kind {
	case locHost:
		if l.ro {
			return pathErr("mkdir", p, syscall.EROFS)
		}
		return wrapNil("mkdir", p, os.Mkdir(l.host, perm))
	case locProc, locDev, locMasked:
		if l.kind == locMasked || l.rel == "" || f.procIsDir(l.rel) || l.kind == locDev {
			return pathErr("mkdir", p, syscall.EEXIST)
		}
		return pathErr("mkdir", p, syscall.EROFS)
	}
	if _, ok := f.get(l.cpath); ok {
		return pathErr("mkdir", p, syscall.EEXIST)
	}
	if err := f.writableParent(c, l); err != nil {
		return pathErr("mkdir", p, err)
	}
	f.set(l.cpath, f.newNode(c, fs.ModeDir|perm.Perm()))
	return nil
}

func wrapNil(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return pathErr(op, p, err)
}

func (f *FS) mkdirAll(c cred, p string, perm fs.FileMode) error {
	p = cleanAbs(p)
	if st, err := f.Stat(p); err == nil {
		if st.IsDir() {
			return nil
		}
		return pathErr("mkdir", p, syscall.ENOTDIR)
	}
	if parent := path.Dir(p); parent != p {
		if err := f.mkdirAll(c, parent, perm); err != nil {
			return err
		}
	}
	err := f.mkdir(c, p, perm)
	if errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return err
}

// Mkdir creates a directory; MkdirAll creates it with its parents.
func (f *FS) Mkdir(p string, perm fs.FileMode) error    { return f.mkdir(rootCred, p, perm) }
func (f *FS) MkdirAll(p string, perm fs.FileMode) error { return f.mkdirAll(rootCred, p, perm) }

func (f *FS) remove(c cred, p string, recursive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, false)
	if err != nil {
		return pathErr("remove", p, err)
	}
	switch l.kind {
	case locHost:
		if l.ro {
			return pathErr("remove", p, syscall.EROFS)
		}
		if _, err := os.Lstat(l.host); err != nil {
			return pathErr("remove", p, err)
		}
		if recursive {
			return wrapNil("remove", p, os.RemoveAll(l.host))
		}
		return wrapNil("remove", p, os.Remove(l.host))
	case locProc, locDev, locMasked:
		return pathErr("remove", p, syscall.EROFS)
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return pathErr("remove", p, syscall.ENOENT)
	}
	if l.cpath == "/" {
		return pathErr("remove", p, syscall.EBUSY)
	}
	if err := f.writableParent(c, l); err != nil {
		return pathErr("remove", p, err)
	}
	for _, m := range f.mounts {
		if m.cpath == l.cpath || strings.HasPrefix(m.cpath, l.cpath+"/") {
			return pathErr("remove", p, syscall.EBUSY)
		}
	}
	if n.isDir() {
		var children []string
		for q := range f.all() {
			if strings.HasPrefix(q, l.cpath+"/") {
				children = append(children, q)
			}
		}
		if len(children) > 0 && !recursive {
			return pathErr("remove", p, syscall.ENOTEMPTY)
		}
		for _, q := range children {
			if c := f.lookup(q); f.owned[c] {
				f.written -= int64(len(c.data))
				delete(f.owned, c)
			}
			f.del(q)
		}
	}
	if f.owned[n] {
		f.written -= int64(len(n.data))
		delete(f.owned, n)
	}
	f.del(l.cpath)
	return nil
}

// Remove removes a file or an empty directory; RemoveAll removes a tree.
func (f *FS) Remove(p string) error    { return f.remove(rootCred, p, false) }
func (f *FS) RemoveAll(p string) error { return f.remove(rootCred, p, true) }

func (f *FS) rename(c cred, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	lf, err := f.resolve(from, false)
	if err != nil {
		return pathErr("rename", from, err)
	}
	lt, err := f.resolve(to, false)
	if err != nil {
		return pathErr("rename", to, err)
	}
	if lf.kind == locHost && lt.kind == locHost {
		if lf.ro || lt.ro {
			return pathErr("rename", from, syscall.EROFS)
		}
		return wrapNil("rename", from, os.Rename(lf.host, lt.host))
	}
	if lf.kind != locMem || lt.kind != locMem {
		return pathErr("rename", from, syscall.EXDEV) // across mounts, as the kernel says
	}
	if _, ok := f.get(lf.cpath); !ok {
		return pathErr("rename", from, syscall.ENOENT)
	}
	if err := f.writableParent(c, lf); err != nil {
		return pathErr("rename", from, err)
	}
	if err := f.writableParent(c, lt); err != nil {
		return pathErr("rename", to, err)
	}
	if dst, ok := f.get(lt.cpath); ok && dst.isDir() {
		return pathErr("rename", to, syscall.EISDIR)
	}
	moved := map[string]*node{}
	for q, n := range f.all() {
		if q == lf.cpath || strings.HasPrefix(q, lf.cpath+"/") {
			moved[lt.cpath+strings.TrimPrefix(q, lf.cpath)] = n
			f.del(q)
		}
	}
	for q, n := range moved {
		f.set(q, n)
	}
	return nil
}

// Rename moves a file or directory.
func (f *FS) Rename(from, to string) error { return f.rename(rootCred, from, to) }

func (f *FS) symlink(c cred, target, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, false)
	if err != nil {
		return pathErr("symlink", p, err)
	}
	if l.kind == locHost {
		if l.ro {
			return pathErr("symlink", p, syscall.EROFS)
		}
		return wrapNil("symlink", p, os.Symlink(target, l.host))
	}
	if l.kind != locMem {
		return pathErr("symlink", p, syscall.EROFS)
	}
	if _, ok := f.get(l.cpath); ok {
		return pathErr("symlink", p, syscall.EEXIST)
	}
	if err := f.writableParent(c, l); err != nil {
		return pathErr("symlink", p, err)
	}
	n := f.newNode(c, fs.ModeSymlink|0o777)
	n.target = target
	f.set(l.cpath, n)
	return nil
}

// Symlink creates p pointing at target.
func (f *FS) Symlink(target, p string) error { return f.symlink(rootCred, target, p) }

func (f *FS) chmod(c cred, p string, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return pathErr("chmod", p, err)
	}
	if l.ro {
		return pathErr("chmod", p, syscall.EROFS)
	}
	if l.kind == locHost {
		return wrapNil("chmod", p, os.Chmod(l.host, mode))
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return pathErr("chmod", p, syscall.ENOENT)
	}
	if !c.dacOverride && n.uid != c.uid {
		return pathErr("chmod", p, syscall.EPERM)
	}
	n = f.ownedNode(l.cpath)
	n.mode = n.mode&^fs.ModePerm | mode.Perm()
	return nil
}

// Readlink returns a symlink's target.
func (f *FS) Readlink(p string) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, false)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	if l.kind == locHost {
		t, err := os.Readlink(l.host)
		return t, wrapNil("readlink", p, err)
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return "", pathErr("readlink", p, syscall.ENOENT)
	}
	if !n.isSymlink() {
		return "", pathErr("readlink", p, syscall.EINVAL)
	}
	return n.target, nil
}

// executable describes what running the file at p does.
type executable struct {
	path   string
	applet string // run this applet
	script []byte // or interpret this script (a "#!" file) with sh
}

// lookExec resolves a file for execution: it must exist, be a regular file and
// be executable; masked paths fail with EACCES like runc's /dev/null bind.
func (f *FS) lookExec(p string) (executable, error) {
	st, l, err := f.stat(p, true)
	if err != nil {
		return executable{}, err
	}
	if l.kind == locMasked || st.IsDir() || st.Mode()&0o111 == 0 || !st.Mode().IsRegular() {
		return executable{}, pathErr("exec", p, syscall.EACCES)
	}
	if l.kind == locMem {
		f.mu.RLock()
		n := f.lookup(l.cpath)
		f.mu.RUnlock()
		if n != nil && n.applet != "" {
			return executable{path: p, applet: n.applet}, nil
		}
	}
	data, err := f.ReadFile(p)
	if err != nil {
		return executable{}, err
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		return executable{path: p, script: data}, nil
	}
	// A real binary we cannot run (for example one on a host mount).
	return executable{}, pathErr("exec", p, syscall.ENOEXEC)
}

// WritableLayerBytes is the size of what the container wrote to its own layer.
func (f *FS) WritableLayerBytes() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.written < 0 {
		return 0
	}
	return f.written
}

// strerror is the C library's message for errno, which busybox prints
// ("touch: /tmp/x: Read-only file system"); Go's are lower case.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	switch errno {
	case syscall.ENOENT:
		return "No such file or directory"
	case syscall.EROFS:
		return "Read-only file system"
	case syscall.EACCES:
		return "Permission denied"
	case syscall.EPERM:
		return "Operation not permitted"
	case syscall.EEXIST:
		return "File exists"
	case syscall.ENOTDIR:
		return "Not a directory"
	case syscall.EISDIR:
		return "Is a directory"
	case syscall.ENOTEMPTY:
		return "Directory not empty"
	case syscall.EXDEV:
		return "Invalid cross-device link"
	case syscall.EBUSY:
		return "Resource busy"
	case syscall.ELOOP:
		return "Symbolic link loop"
	case syscall.EINVAL:
		return "Invalid argument"
	case syscall.ENOSPC:
		return "No space left on device"
	case syscall.ENOEXEC:
		return "Exec format error"
	case syscall.ESRCH:
		return "No such process"
	}
	s := errno.Error()
	if s != "" {
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}
