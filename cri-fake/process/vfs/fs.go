package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mount maps a container path onto a REAL host path: reads and writes under
// ContainerPath go to HostPath on the host, as a bind mount would. A symlinked
// HostPath is resolved when the file system is built, like runc resolves the
// mount source before bind-mounting it; ContainerPath is resolved in the
// container's view, like runc places the mount inside the rootfs. Nothing the
// container does reaches outside HostPath: see resolve.go and mounts.go.
type Mount struct {
	ContainerPath string
	HostPath      string
	Readonly      bool
	// RecursiveReadOnly makes mounts nested under HostPath read-only too.
	// Without it a read-only bind mount is read-only only for its own file
	// system: a file system mounted below HostPath stays writable, as the
	// kernel's non-recursive MS_RDONLY bind does.
	RecursiveReadOnly bool
	// Propagation is the CRI mount's propagation (mounttable.go).
	Propagation Propagation
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
	// ImageVolumes are images mounted read-only in the view (imagevolume.go).
	ImageVolumes []ImageVolume
	// MemoryLimit bounds the bytes the container's own files hold (those
	// written outside any mount, which live in cri-fake's memory): past it a
	// write fails with ENOSPC, as on a full tmpfs. FromCRI sets the
	// container's memory limit (linux resources memory_limit_in_bytes);
	// 0 or less means DefaultMemoryLimit.
	MemoryLimit int64
}

// DefaultMemoryLimit bounds a container's own files when its config sets no
// memory limit: 64 MiB, a small tmpfs.
const DefaultMemoryLimit = 64 << 20

// entryOverhead is what each path of the writable layer is counted for
// besides its name and content: about what its node and map entries take,
// so creating empty files or directories in a loop fills the bound too (a
// tmpfs runs out of inodes the same way).
const EntryOverhead = 256

func EntryCost(p string) int64 { return int64(len(p)) + EntryOverhead }

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
	mounts   []*mountPoint  // longest container path first
	mountAt  map[string]*mountPoint
	mtab     *mountTable // propagation and the processes' own mounts; nil until needed
	cfg      FSConfig
	sysctls  map[string]string
	// written is the content the container wrote to its own layer (file data
	// and symlink targets, copy-ups included: WritableLayerBytes); held the
	// memory that content takes (array capacities), meta what its paths are
	// counted for (entryCost). held+meta stays within limit (MemoryLimit).
	written int64
	held    int64
	meta    int64
	shm     int64 // the part of held that nodes written on /dev/shm take (ShmHeld)
	limit   int64
	// writers counts the open writers of a node: a file removed while open
	// keeps its bytes counted until the last writer closes, as on tmpfs.
	writers map[*node]int
	// proc answers reads under /proc other than /proc/sys (set by the container,
	// which owns the process table). rel is the path below /proc.
	proc func(rel string) ([]byte, bool)
	// procList lists directory entries under /proc (pids).
	procList func() []string
	// memcg is the container's memory controller (memcg.go), nil for none.
	memcg MemoryCgroup
	// sys answers under /sys (sysfs.go); nil leaves /sys to the image.
	sys SysTree
	// images are the image volumes, in the order they were placed (imagevolume.go).
	images []imageMount
}

// SetProc installs what answers under /proc besides /proc/sys: read gives
// the content of the file rel below /proc (a directory when rel ends in "/"),
// list the pid directories. The container sets it: it owns the process table.
func (f *FS) SetProc(read func(rel string) ([]byte, bool), list func() []string) {
	f.proc, f.procList = read, list
}

// Config is the configuration the view was built from.
func (f *FS) Config() FSConfig { return f.cfg }

// Sysctls is a copy of the sysctls /proc/sys shows, keyed by their path below
// /proc/sys ("net/ipv4/ip_forward").
func (f *FS) Sysctls() map[string]string { return maps.Clone(f.sysctls) }

// NewFS builds a container file system from cfg.
func NewFS(cfg FSConfig) (*FS, error) {
	img := cfg.Image
	if img == nil {
		img = NewLayer()
	}
	f := &FS{lower: img, upper: map[string]*node{}, whiteout: map[string]bool{}, owned: map[*node]bool{}, cfg: cfg, sysctls: map[string]string{}, limit: cfg.MemoryLimit}
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
	if err := f.addMounts(cfg.Mounts, add); err != nil {
		return nil, err
	}
	if err := f.addImageVolumes(cfg.ImageVolumes); err != nil {
		return nil, err
	}
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
	if len(f.images) > 0 {
		if n, covered := f.imageNode(p); covered {
			return n, n != nil
		}
	}
	n, ok := f.lower.entries[p]
	return n, ok
}

func (f *FS) lookup(p string) *node {
	n, _ := f.get(p)
	return n
}

func (f *FS) set(p string, n *node) {
	if _, ok := f.upper[p]; !ok {
		f.meta += EntryCost(p)
	}
	f.upper[p] = n
	if f.whiteout[p] {
		delete(f.whiteout, p)
		f.meta -= EntryCost(p)
	}
}

func (f *FS) del(p string) {
	if _, ok := f.upper[p]; ok {
		delete(f.upper, p)
		f.meta -= EntryCost(p)
	}
	if _, ok := f.lower.entries[p]; ok && !f.whiteout[p] {
		f.whiteout[p] = true
		f.meta += EntryCost(p)
	}
}

// limitBytes is the bound on held+meta. Caller holds f.mu.
func (f *FS) limitBytes() int64 {
	if f.limit > 0 {
		return f.limit
	}
	return DefaultMemoryLimit
}

// fits reports whether n more bytes may be held in the container's own
// layer. Caller holds f.mu.
func (f *FS) fits(n int64) bool { return f.held+f.meta+n+f.otherMemory() <= f.limitBytes() }

// release drops an owned node that left the tree (removed, or replaced by a
// rename): its content stops counting once no writer holds it. Caller holds
// f.mu.
func (f *FS) release(n *node) {
	if !f.owned[n] {
		return
	}
	delete(f.owned, n)
	if f.writers[n] == 0 {
		f.written -= n.bytes()
		f.dropHeld(n, n.held())
	}
}

// Held is what the memory bound counts now, and the capacity of the arrays
// the file p of the container's own layer holds (0 when p is "" or not there),
// for tests and debugging.
func (f *FS) Held(p string) (counted, capacity int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if n := f.upper[p]; n != nil {
		capacity = int64(cap(n.data))
		for _, c := range n.chunks {
			capacity += int64(cap(c))
		}
	}
	return f.held + f.meta, capacity
}

// SetMemoryLimit changes the bound of MemoryLimit (UpdateContainerResources);
// 0 or less means DefaultMemoryLimit. What is held already stays.
func (f *FS) SetMemoryLimit(n int64) {
	f.mu.Lock()
	f.limit = n
	f.mu.Unlock()
}

// all is the merged view (a fresh map: used by listings, removals, renames).
func (f *FS) all() map[string]*node {
	out := make(map[string]*node, len(f.lower.entries)+len(f.upper))
	for p, n := range f.lower.entries {
		if !f.whiteout[p] {
			out[p] = n
		}
	}
	f.imageEntries(out)
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
type Cred struct {
	UID  int
	GIDs []int
	// dacOverride is CAP_DAC_OVERRIDE: root and privileged processes bypass checks.
	DACOverride bool
	// Chown is CAP_CHOWN (ChownAs); the kernel sets it only for a chown.
	Chown bool
}

var RootCred = Cred{DACOverride: true}

func pathErr(op, p string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &fs.PathError{Op: op, Path: p, Err: errno}
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

var devices = map[string]bool{"null": true, "zero": true, "random": true, "urandom": true, "full": true, "tty": true, "stdout": true, "stderr": true, "stdin": true}

func (f *FS) underPrefix(list []string, p string) bool {
	for _, q := range list {
		q = path.Clean(q)
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

type memInfo struct {
	name     string
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	uid, gid int
}

// info describes n as it is now (a copy: the node may change after the lock
// is released). Caller holds f.mu.
func info(name string, n *node) memInfo {
	return memInfo{name: name, mode: n.mode, size: n.size(), mtime: n.mtime, uid: n.uid, gid: n.gid}
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return &Owner{UID: i.uid, GID: i.gid} }

// Owner is the Sys() value of a FileInfo from the in-memory layers.
type Owner struct{ UID, GID int }

func virtualInfo(name string, mode fs.FileMode, size int) fs.FileInfo {
	return memInfo{name: name, mode: mode, size: int64(size), mtime: time.Now()}
}

// namedInfo is a host file's information under its name in the container
// (a mount point's host directory has another name).
type namedInfo struct {
	fs.FileInfo
	name string
}

func (i namedInfo) Name() string { return i.name }

// StatReadOnly is Stat, and whether p lies on a read-only part of the view
// (a read-only rootfs, mount or path): test -w answers from it.
func (f *FS) StatReadOnly(p string) (st fs.FileInfo, readOnly bool, err error) {
	st, l, err := f.stat(p, true)
	return st, l.ro, err
}

func (f *FS) stat(p string, follow bool) (fs.FileInfo, loc, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, follow, false)
	if err != nil {
		return nil, l, pathErr("stat", p, err)
	}
	name := path.Base(l.cpath)
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return nil, l, pathErr("stat", p, err)
		}
		// Lstat even when following: walk followed every symlink, so what
		// is left is no link (or one swapped in since, not to be followed).
		st, err := r.Lstat(l.rel)
		if err != nil {
			return nil, l, pathErr("stat", p, err)
		}
		return namedInfo{st, name}, l, nil
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
	case locSys:
		st, ok := f.sysStat(l.rel)
		if !ok {
			return nil, l, pathErr("stat", p, syscall.ENOENT)
		}
		return st, l, nil
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return nil, l, pathErr("stat", p, syscall.ENOENT)
	}
	return info(name, n), l, nil
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
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, true, false)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		file, err := r.Open(l.rel)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		if st, err := file.Stat(); err == nil && st.IsDir() {
			file.Close()
			return nil, pathErr("read", p, syscall.EISDIR)
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
	case locSys:
		st, ok := f.sysStat(l.rel)
		if !ok {
			return nil, pathErr("open", p, syscall.ENOENT)
		}
		if st.IsDir() {
			return nil, pathErr("read", p, syscall.EISDIR)
		}
		return io.NopCloser(&sysReader{sys: f.sys, rel: l.rel}), nil
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return nil, pathErr("open", p, syscall.ENOENT)
	}
	if n.special() {
		return nil, pathErr("open", p, syscall.ENXIO)
	}
	if n.isDir() {
		return nil, pathErr("read", p, syscall.EISDIR)
	}
	// The bytes are shared, not copied: a node's content is only ever
	// appended to or replaced, never changed in place.
	return io.NopCloser(n.reader()), nil
}

// ReadDir lists a directory, sorted by name.
func (f *FS) ReadDir(p string) ([]fs.FileInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, true, false)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	var out []fs.FileInfo
	switch l.kind {
	case locHost:
		r, err := roots.get(l.m)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		dir, err := r.Open(l.rel)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		defer dir.Close()
		ents, err := dir.ReadDir(-1)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		for _, e := range ents {
			if st, err := e.Info(); err == nil {
				out = append(out, st)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
		return out, nil
	case locMasked:
		return nil, nil
	case locDev:
		return nil, pathErr("open", p, syscall.ENOTDIR)
	case locSys:
		if out, ok := f.sysReadDir(l.rel); ok {
			return out, nil
		}
		if _, ok := f.sysStat(l.rel); ok {
			return nil, pathErr("open", p, syscall.ENOTDIR)
		}
		return nil, pathErr("open", p, syscall.ENOENT)
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
		out = append(out, info(q[len(prefix):], c))
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
func (c Cred) canWrite(n *node) bool {
	if c.DACOverride || n == nil {
		return true
	}
	perm := n.mode.Perm()
	if n.uid == c.UID {
		return perm&0o200 != 0
	}
	for _, g := range c.GIDs {
		if g == n.gid {
			return perm&0o020 != 0
		}
	}
	return perm&0o002 != 0
}

// writableParent checks that the parent directory of a memory path exists and
// may be written. Caller holds f.mu.
func (f *FS) writableParent(c Cred, l loc) error {
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

func (f *FS) newNode(c Cred, mode fs.FileMode) *node {
	n := &node{mode: mode, uid: c.UID, mtime: time.Now()}
	if len(c.GIDs) > 0 {
		n.gid = c.GIDs[0]
	}
	f.owned[n] = true
	return n
}

// ownedNode returns a node at p that this FS may mutate, copying a shared one
// up (with its content when keepData is set). A copy-up that does not fit in
// the bound fails with ENOSPC, as on a full overlay upper directory. Caller
// holds f.mu.
func (f *FS) ownedNode(p string, keepData bool) (*node, error) {
	n := f.lookup(p)
	if n == nil || f.owned[n] {
		return n, nil
	}
	grow := int64(len(n.target))
	if keepData {
		grow = n.bytes() // clone's arrays are exactly the content's size
	}
	if _, inUpper := f.upper[p]; !inUpper {
		grow += EntryCost(p)
	}
	if !f.fits(grow) {
		return nil, syscall.ENOSPC
	}
	if keepData {
		n = n.clone()
	} else {
		c := *n
		c.data, c.chunks = nil, nil
		n = &c
	}
	f.owned[n] = true
	f.set(p, n)
	f.written += n.bytes() // an overlay copy-up lands in the upper layer
	f.held += n.held()
	return n, nil
}

// memWriter appends to an in-memory file.
type memWriter struct {
	f      *FS
	n      *node
	closed bool
	tmpfs  bool // on /dev/shm: past the bound, the OOM killer (memcg.go)
}

// Write appends what fits in the container's bound and fails the rest with
// ENOSPC ("No space left on device"), as a write to a full tmpfs does.
func (w *memWriter) Write(b []byte) (int, error) {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.closed {
		return 0, os.ErrClosed
	}
	n, grown := w.n.appendChunks(b, f.limitBytes()-f.held-f.meta-f.otherMemory())
	f.written += n
	f.held += grown
	if w.n.shm {
		f.shm += grown
	}
	if n > 0 {
		w.n.mtime = time.Now()
	}
	if n < int64(len(b)) {
		if w.tmpfs && f.memcg != nil && f.memcg.OutOfMemory() {
			return int(n), syscall.ENOMEM
		}
		return int(n), syscall.ENOSPC
	}
	return len(b), nil
}

func (w *memWriter) Close() error {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if f.writers[w.n]--; f.writers[w.n] <= 0 {
		delete(f.writers, w.n)
		if !f.owned[w.n] {
			f.written -= w.n.bytes() // removed while open: its bytes go now
			f.dropHeld(w.n, w.n.held())
		}
	}
	return nil
}

// newWriter opens a writer on an owned node. Caller holds f.mu.
func (f *FS) newWriter(n *node, p string) *memWriter {
	if f.writers == nil {
		f.writers = map[*node]int{}
	}
	f.writers[n]++
	if isTmpfs(p) && n.held() == 0 {
		n.shm = true // from its first byte: what it holds is counted as /dev/shm's
	}
	return &memWriter{f: f, n: n, tmpfs: isTmpfs(p)}
}

type Discard struct{}

func (Discard) Write(b []byte) (int, error) { return len(b), nil }
func (Discard) Close() error                { return nil }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }
func (e errWriter) Close() error              { return nil }

func (f *FS) OpenWriteAs(c Cred, p string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, true, false)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	switch l.kind {
	case locDev:
		if l.rel == "full" {
			return errWriter{syscall.ENOSPC}, nil
		}
		return Discard{}, nil
	case locMasked:
		if n, ok := f.get(l.cpath); ok && n.isDir() {
			return nil, pathErr("open", p, syscall.EISDIR)
		}
		return Discard{}, nil // a masked file is /dev/null
	case locProc, locSys:
		return nil, pathErr("open", p, syscall.EROFS)
	case locHost:
		if l.ro {
			return nil, pathErr("open", p, syscall.EROFS)
		}
		r, err := roots.get(l.m)
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		flag := os.O_WRONLY | os.O_CREATE
		if appendMode {
			flag |= os.O_APPEND
		} else {
			flag |= os.O_TRUNC
		}
		_, statErr := r.Lstat(l.rel)
		file, err := r.OpenFile(l.rel, flag, perm.Perm())
		if err != nil {
			return nil, pathErr("open", p, err)
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			hostCreated(r, l.rel, file, c, perm.Perm())
		}
		return file, nil
	}
	n, ok := f.get(l.cpath)
	if ok && n.isDir() {
		return nil, pathErr("open", p, syscall.EISDIR)
	}
	if ok && n.special() {
		return nil, pathErr("open", p, syscall.ENXIO)
	}
	if l.ro {
		return nil, pathErr("open", p, syscall.EROFS)
	}
	if ok {
		if !c.canWrite(n) {
			return nil, pathErr("open", p, syscall.EACCES)
		}
		if n, err = f.ownedNode(l.cpath, appendMode); err != nil {
			return nil, pathErr("open", p, err)
		}
		if !appendMode {
			f.written -= n.size()
			f.dropHeld(n, n.held()-int64(len(n.target)))
			n.data, n.chunks = nil, nil
		}
		n.mtime = time.Now()
		return f.newWriter(n, l.cpath), nil
	}
	if err := f.writableParent(c, l); err != nil {
		return nil, pathErr("open", p, err)
	}
	if !f.fits(EntryCost(l.cpath)) {
		return nil, pathErr("open", p, syscall.ENOSPC)
	}
	n = f.newNode(c, perm.Perm())
	f.set(l.cpath, n)
	return f.newWriter(n, l.cpath), nil
}

// OpenWrite opens p for writing (creating it with perm), truncating it unless
// appendMode is set.
func (f *FS) OpenWrite(p string, appendMode bool, perm fs.FileMode) (io.WriteCloser, error) {
	return f.OpenWriteAs(RootCred, p, appendMode, perm)
}

func (f *FS) WriteFileAs(c Cred, p string, data []byte, perm fs.FileMode) error {
	w, err := f.OpenWriteAs(c, p, false, perm)
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
	return f.WriteFileAs(RootCred, p, data, perm)
}

func (f *FS) TouchAs(c Cred, p string) error {
	f.mu.Lock()
	var roots hostRoots
	l, err := f.walk(&roots, p, true, false)
	done := func(err error) error {
		roots.close()
		f.mu.Unlock()
		return wrapNil("touch", p, err)
	}
	if err == nil && l.kind == locMem {
		if n, ok := f.get(l.cpath); ok {
			if l.ro {
				return done(syscall.EROFS)
			}
			if !c.canWrite(n) {
				return done(syscall.EACCES)
			}
			if n, err = f.ownedNode(l.cpath, true); err != nil {
				return done(err)
			}
			n.mtime = time.Now()
			return done(nil)
		}
	}
	if err == nil && l.kind == locHost {
		r, err := roots.get(l.m)
		if err != nil {
			return done(err)
		}
		if _, err := r.Lstat(l.rel); err == nil {
			if l.ro {
				return done(syscall.EROFS)
			}
			now := time.Now()
			return done(r.Chtimes(l.rel, now, now))
		}
	}
	done(nil)
	w, err := f.OpenWriteAs(c, p, true, 0o644)
	if err != nil {
		return err
	}
	return w.Close()
}

func (f *FS) MkdirAs(c Cred, p string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, false, false)
	if err != nil {
		return pathErr("mkdir", p, err)
	}
	switch l.kind {
	case locHost:
		if l.ro {
			return pathErr("mkdir", p, syscall.EROFS)
		}
		r, err := roots.get(l.m)
		if err != nil {
			return pathErr("mkdir", p, err)
		}
		if err := r.Mkdir(l.rel, perm.Perm()); err != nil {
			return pathErr("mkdir", p, err)
		}
		if dir, err := r.OpenFile(l.rel, unix.O_PATH|unix.O_NOFOLLOW, 0); err == nil {
			hostCreated(r, l.rel, dir, c, perm.Perm())
			dir.Close()
		}
		if special := perm & (fs.ModeSticky | fs.ModeSetgid | fs.ModeSetuid); special != 0 {
			return wrapNil("mkdir", p, r.Chmod(l.rel, perm.Perm()|special)) // Root.Mkdir takes permission bits only
		}
		return nil
	}
	return f.create(c, l, "mkdir", p, fs.ModeDir|perm.Perm())
}

// create makes a new node of mode at l as c (mkdir, mknod) where l is not a
// host mount: EEXIST for what is there (or is a /proc, /dev or masked path),
// EROFS in /proc's files, the parent's write permission, ENOSPC past the
// memory bound. Caller holds f.mu.
func (f *FS) create(c Cred, l loc, op, p string, mode fs.FileMode) error {
	switch l.kind {
	case locProc, locDev, locMasked:
		if l.kind == locMasked || l.rel == "" || f.procIsDir(l.rel) || l.kind == locDev {
			return pathErr(op, p, syscall.EEXIST)
		}
		return pathErr(op, p, syscall.EROFS)
	case locSys:
		if _, ok := f.sysStat(l.rel); ok {
			return pathErr(op, p, syscall.EEXIST)
		}
		return pathErr(op, p, syscall.EROFS)
	}
	if _, ok := f.get(l.cpath); ok {
		return pathErr(op, p, syscall.EEXIST)
	}
	if err := f.writableParent(c, l); err != nil {
		return pathErr(op, p, err)
	}
	if !f.fits(EntryCost(l.cpath)) {
		return pathErr(op, p, syscall.ENOSPC)
	}
	f.set(l.cpath, f.newNode(c, mode))
	return nil
}

func wrapNil(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return pathErr(op, p, err)
}

func (f *FS) MkdirAllAs(c Cred, p string, perm fs.FileMode) error {
	p = cleanAbs(p)
	if st, err := f.Stat(p); err == nil {
		if st.IsDir() {
			return nil
		}
		return pathErr("mkdir", p, syscall.ENOTDIR)
	}
	if parent := path.Dir(p); parent != p {
		if err := f.MkdirAllAs(c, parent, perm); err != nil {
			return err
		}
	}
	err := f.MkdirAs(c, p, perm)
	if errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return err
}

// Mkdir creates a directory; MkdirAll creates it with its parents.
func (f *FS) Mkdir(p string, perm fs.FileMode) error    { return f.MkdirAs(RootCred, p, perm) }
func (f *FS) MkdirAll(p string, perm fs.FileMode) error { return f.MkdirAllAs(RootCred, p, perm) }

// busy reports whether p is a mount point or has one below it: the kernel
// refuses to remove or rename it (EBUSY).
func (f *FS) busy(p string) bool {
	for _, m := range f.mounts {
		if m.cpath == p || p == "/" || strings.HasPrefix(m.cpath, p+"/") {
			return true
		}
	}
	return false
}

func (f *FS) RemoveAs(c Cred, p string, recursive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, false, false)
	if err != nil {
		return pathErr("remove", p, err)
	}
	switch l.kind {
	case locHost:
		if l.ro {
			return pathErr("remove", p, syscall.EROFS)
		}
		r, err := roots.get(l.m)
		if err != nil {
			return pathErr("remove", p, err)
		}
		if f.busy(l.cpath) {
			if recursive && f.mountAt[l.cpath] == l.m && l.m.isDir() {
				// rm -rf of a mount point empties it, then fails on the
				// mount point itself.
				f.emptyMountRoot(r, l.cpath)
			}
			return pathErr("remove", p, syscall.EBUSY)
		}
		if _, err := r.Lstat(l.rel); err != nil {
			return pathErr("remove", p, err)
		}
		if recursive {
			return wrapNil("remove", p, r.RemoveAll(l.rel)) // never follows a symlink, in or out of the root
		}
		return wrapNil("remove", p, r.Remove(l.rel))
	case locProc, locDev, locMasked, locSys:
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
	if f.busy(l.cpath) {
		return pathErr("remove", p, syscall.EBUSY)
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
			if child := f.lookup(q); child != nil {
				f.release(child)
			}
			f.del(q)
		}
	}
	f.release(n)
	f.del(l.cpath)
	return nil
}

// emptyMountRoot removes what a directory mount holds, but the mount points
// of other mounts below it. Caller holds f.mu.
func (f *FS) emptyMountRoot(r *os.Root, cpath string) {
	dir, err := r.Open(".")
	if err != nil {
		return
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	for _, n := range names {
		if !f.busy(path.Join(cpath, n)) {
			r.RemoveAll(n)
		}
	}
}

// Remove removes a file or an empty directory; RemoveAll removes a tree.
func (f *FS) Remove(p string) error    { return f.RemoveAs(RootCred, p, false) }
func (f *FS) RemoveAll(p string) error { return f.RemoveAs(RootCred, p, true) }

func (f *FS) RenameAs(c Cred, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	lf, err := f.walk(&roots, from, false, false)
	if err != nil {
		return pathErr("rename", from, err)
	}
	lt, err := f.walk(&roots, to, false, false)
	if err != nil {
		return pathErr("rename", to, err)
	}
	// The root is the container's root mount: rename(2) of it, or onto it, is EBUSY even when
	// no other mount is there for busy to find (`mv / /x` must not move the whole tree).
	if lf.cpath == "/" || lt.cpath == "/" || f.busy(lf.cpath) || f.busy(lt.cpath) {
		return pathErr("rename", from, syscall.EBUSY)
	}
	if lf.kind == locHost && lt.kind == locHost && lf.m == lt.m {
		if lf.ro || lt.ro {
			return pathErr("rename", from, syscall.EROFS)
		}
		r, err := roots.get(lf.m)
		if err != nil {
			return pathErr("rename", from, err)
		}
		return wrapNil("rename", from, r.Rename(lf.rel, lt.rel))
	}
	if lf.kind != locMem || lt.kind != locMem {
		// Across mounts, even of one host file system, as the kernel says;
		// mv then copies and removes.
		return pathErr("rename", from, syscall.EXDEV)
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
	if lt.cpath == lf.cpath {
		return nil
	}
	if strings.HasPrefix(lt.cpath, lf.cpath+"/") {
		return pathErr("rename", from, syscall.EINVAL) // into itself
	}
	dst, exists := f.get(lt.cpath)
	if exists && dst.isDir() {
		return pathErr("rename", to, syscall.EISDIR)
	}
	moved := map[string]*node{}
	var olds []string
	for q, n := range f.all() {
		if q == lf.cpath || strings.HasPrefix(q, lf.cpath+"/") {
			moved[lt.cpath+strings.TrimPrefix(q, lf.cpath)] = n
			olds = append(olds, q)
		}
	}
	if grow := int64(len(olds) * (len(lt.cpath) - len(lf.cpath))); grow > 0 && !f.fits(grow) {
		return pathErr("rename", to, syscall.ENOSPC) // longer names for a whole tree
	}
	if exists {
		f.release(dst)
	}
	for _, q := range olds {
		f.del(q)
	}
	for q, n := range moved {
		f.set(q, n)
	}
	return nil
}

// Rename moves a file or directory.
func (f *FS) Rename(from, to string) error { return f.RenameAs(RootCred, from, to) }

func (f *FS) SymlinkAs(c Cred, target, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case target == "":
		return pathErr("symlink", p, syscall.ENOENT)
	case len(target) >= pathMax:
		return pathErr("symlink", p, syscall.ENAMETOOLONG)
	}
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, false, false)
	if err != nil {
		return pathErr("symlink", p, err)
	}
	if l.kind == locHost {
		if l.ro {
			return pathErr("symlink", p, syscall.EROFS)
		}
		if f.mountAt[l.cpath] != nil {
			return pathErr("symlink", p, syscall.EEXIST)
		}
		r, err := roots.get(l.m)
		if err != nil {
			return pathErr("symlink", p, err)
		}
		// A real symlink, whatever its target: it only ever matters through
		// walk, which follows it in the container's view. (The host's own
		// tools may follow it on the host; that is the host's business, as
		// with a symlink a real container writes into a hostPath.)
		return wrapNil("symlink", p, r.Symlink(target, l.rel))
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
	if !f.fits(EntryCost(l.cpath) + int64(len(target))) {
		return pathErr("symlink", p, syscall.ENOSPC)
	}
	n := f.newNode(c, fs.ModeSymlink|0o777)
	n.target = target
	f.set(l.cpath, n)
	f.written += n.bytes()
	f.held += n.held()
	return nil
}

// Symlink creates p pointing at target.
func (f *FS) Symlink(target, p string) error { return f.SymlinkAs(RootCred, target, p) }

func (f *FS) ChmodAs(c Cred, p string, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, true, false)
	if err != nil {
		return pathErr("chmod", p, err)
	}
	if l.ro {
		return pathErr("chmod", p, syscall.EROFS)
	}
	if l.kind == locHost {
		r, err := roots.get(l.m)
		if err != nil {
			return pathErr("chmod", p, err)
		}
		// Root.Chmod never follows a symlink (AT_SYMLINK_NOFOLLOW): one
		// swapped in meanwhile is changed itself, not its target.
		return wrapNil("chmod", p, r.Chmod(l.rel, mode))
	}
	n, ok := f.get(l.cpath)
	if !ok {
		return pathErr("chmod", p, syscall.ENOENT)
	}
	if !c.DACOverride && n.uid != c.UID {
		return pathErr("chmod", p, syscall.EPERM)
	}
	if n, err = f.ownedNode(l.cpath, true); err != nil {
		return pathErr("chmod", p, err)
	}
	n.mode = n.mode&^fs.ModePerm | mode.Perm()
	return nil
}

// Readlink returns a symlink's target.
func (f *FS) Readlink(p string) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var roots hostRoots
	defer roots.close()
	l, err := f.walk(&roots, p, false, false)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	if l.kind == locHost {
		r, err := roots.get(l.m)
		if err != nil {
			return "", pathErr("readlink", p, err)
		}
		t, err := r.Readlink(l.rel)
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
type Executable struct {
	Path   string
	Applet string // run this applet
	Script []byte // or interpret this script (a "#!" file) with sh
	// Mode and Owner are the file's: execve(2) honours a set-user-ID bit
	// (Mode&fs.ModeSetuid) by making Owner the effective uid.
	Mode  fs.FileMode
	Owner int
}

// lookExec resolves a file for execution: it must exist, be a regular file and
// be executable; masked paths fail with EACCES like runc's /dev/null bind.
func (f *FS) LookExec(p string) (Executable, error) {
	st, l, err := f.stat(p, true)
	if err != nil {
		return Executable{}, err
	}
	if l.kind == locMasked || st.IsDir() || st.Mode()&0o111 == 0 || !st.Mode().IsRegular() {
		return Executable{}, pathErr("exec", p, syscall.EACCES)
	}
	if l.kind == locMem {
		f.mu.RLock()
		n := f.lookup(l.cpath)
		f.mu.RUnlock()
		if n != nil && n.applet != "" {
			return Executable{Path: p, Applet: n.applet, Mode: n.mode, Owner: n.uid}, nil
		}
	}
	data, err := f.ReadFile(p)
	if err != nil {
		return Executable{}, err
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		return Executable{Path: p, Script: data}, nil
	}
	// A real binary we cannot run (for example one on a host mount).
	return Executable{}, pathErr("exec", p, syscall.ENOEXEC)
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
func Strerror(err error) string {
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
	case syscall.ENAMETOOLONG:
		return "File name too long"
	case syscall.ESRCH:
		return "No such process"
	}
	s := errno.Error()
	if s != "" {
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}
