package vfs

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// node is one entry of an in-memory layer. Nodes are never mutated once they are
// reachable from more than one layer: writers replace the node (copy on write), so
// an image layer can be shared by every container started from it.
type node struct {
	mode fs.FileMode // type bits (fs.ModeDir, fs.ModeSymlink) and permission bits
	data []byte      // file content (then chunks)
	// chunks is what a container appended to a file of its own layer: arrays
	// of growing size (up to maxChunk) that are filled and never copied, so a
	// growing file holds at most one partly empty array and leaves no garbage.
	chunks [][]byte
	target string // symlink target
	applet string // for executables: the applet that runs when this file is executed
	uid    int
	gid    int
	mtime  time.Time
	shm    bool // its content was written on /dev/shm: counted in FS.shm too (memcg.go)
}

func (n *node) isDir() bool     { return n.mode&fs.ModeDir != 0 }
func (n *node) isSymlink() bool { return n.mode&fs.ModeSymlink != 0 }

// size is the length of a file's content.
func (n *node) size() int64 {
	s := len(n.data)
	for _, c := range n.chunks {
		s += len(c)
	}
	return int64(s)
}

// bytes is the content a node holds (what WritableLayerBytes reports); held
// the memory it takes for it (array capacities: what the bound counts).
func (n *node) bytes() int64 { return n.size() + int64(len(n.target)) }

func (n *node) held() int64 {
	h := cap(n.data) + len(n.target)
	for _, c := range n.chunks {
		h += cap(c)
	}
	return int64(h)
}

// reader reads the content as it is now: later appends land beyond the
// lengths it captured, and nothing is changed in place.
func (n *node) reader() io.Reader {
	if len(n.chunks) == 0 {
		return bytes.NewReader(n.data)
	}
	rs := make([]io.Reader, 0, 1+len(n.chunks))
	rs = append(rs, bytes.NewReader(n.data))
	for _, c := range n.chunks {
		rs = append(rs, bytes.NewReader(c))
	}
	return io.MultiReader(rs...)
}

func (n *node) clone() *node {
	c := *n
	c.data = make([]byte, 0, n.size())
	c.data = append(c.data, n.data...)
	for _, ch := range n.chunks {
		c.data = append(c.data, ch...)
	}
	c.chunks = nil
	return &c
}

// maxChunk is the largest array a file's appended content is kept in.
const MaxChunk = 64 << 10

// appendChunks appends what of b fits in room more bytes of capacity; it
// returns how much it appended and the capacity it took.
func (n *node) appendChunks(b []byte, room int64) (written, grown int64) {
	for len(b) > 0 {
		if k := len(n.chunks); k > 0 {
			last := n.chunks[k-1]
			if free := cap(last) - len(last); free > 0 {
				m := min(free, len(b))
				n.chunks[k-1] = append(last, b[:m]...)
				b = b[m:]
				written += int64(m)
				continue
			}
		}
		// The next array: twice the last one (512 bytes first), up to
		// maxChunk, and no more than what the write needs or room allows.
		size := 512
		if k := len(n.chunks); k > 0 {
			size = min(2*cap(n.chunks[k-1]), MaxChunk)
		}
		size = max(size, min(len(b), MaxChunk))
		if int64(size) > room-grown {
			size = int(room - grown)
		}
		if size <= 0 {
			break
		}
		n.chunks = append(n.chunks, make([]byte, 0, size))
		grown += int64(size)
	}
	return written, grown
}

// Layer is image content: a read-only tree of directories, files, symlinks and
// simulated executables (a file whose execution runs an applet). Build one with
// NewLayer and the Add* methods, or start from BaseLayer. A Layer must not be
// changed after it has been handed to NewFS.
type Layer struct {
	entries map[string]*node

	// etc caches the /etc/passwd and /etc/group NewFS generates when a
	// container adds no users or groups (the common case).
	etcOnce sync.Once
	passwd  []byte
	group   []byte
	// vol are the files the layer shows as an image volume (imagevolume.go).
	vol volumeEtc
}

// NewLayer returns a layer holding only "/".
func NewLayer() *Layer {
	l := &Layer{entries: map[string]*node{}}
	l.entries["/"] = &node{mode: fs.ModeDir | 0o755, mtime: imageTime}
	return l
}

// imageTime is the modification time of image content, fixed so listings are stable.
var imageTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func cleanAbs(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

func (l *Layer) ensureParents(p string) {
	dir := path.Dir(p)
	if dir == p {
		return
	}
	if _, ok := l.entries[dir]; !ok {
		l.ensureParents(dir)
		l.entries[dir] = &node{mode: fs.ModeDir | 0o755, mtime: imageTime}
	}
}

// AddDir adds a directory (and its missing parents, mode 0755).
func (l *Layer) AddDir(p string, perm fs.FileMode) *Layer {
	p = cleanAbs(p)
	l.ensureParents(p)
	l.entries[p] = &node{mode: fs.ModeDir | perm.Perm() | (perm & fs.ModeSticky), mtime: imageTime}
	return l
}

// AddFile adds a regular file.
func (l *Layer) AddFile(p string, data []byte, perm fs.FileMode) *Layer {
	p = cleanAbs(p)
	l.ensureParents(p)
	l.entries[p] = &node{mode: perm.Perm(), data: data, mtime: imageTime}
	return l
}

// AddApplet adds an executable file that runs the named applet (see Applets).
func (l *Layer) AddApplet(p, applet string) *Layer {
	p = cleanAbs(p)
	l.ensureParents(p)
	l.entries[p] = &node{mode: 0o755, applet: applet, data: []byte("\x7fELF simulated " + applet + "\n"), mtime: imageTime}
	return l
}

// AddSymlink adds a symbolic link.
func (l *Layer) AddSymlink(p, target string) *Layer {
	p = cleanAbs(p)
	l.ensureParents(p)
	l.entries[p] = &node{mode: fs.ModeSymlink | 0o777, target: target, mtime: imageTime}
	return l
}

// has reports whether name resolves in the layer: an absolute path that
// exists, or a command found in the default PATH directories.
func (l *Layer) Has(name string) bool {
	if strings.HasPrefix(name, "/") {
		_, ok := l.entries[cleanAbs(name)]
		return ok
	}
	for _, dir := range strings.Split(DefaultPath, ":") {
		if _, ok := l.entries[dir+"/"+name]; ok {
			return true
		}
	}
	return false
}

// Paths lists the layer's paths in order (for tests and debugging).
func (l *Layer) Paths() []string {
	out := make([]string, 0, len(l.entries))
	for p := range l.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// DefaultPath is the PATH a process gets when its environment sets none
// (execvp's and busybox ash's default); image lookups search it too.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
