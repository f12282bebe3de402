package ipam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Typed errors, so that the plugin can choose the CNI error code at its boundary.
var (
	// ErrExhausted: a range set has no free address left.
	ErrExhausted = errors.New("no free address")
	// ErrDuplicate: the (container ID, interface) pair already holds a lease. The spec says ADD
	// "MUST" fail when the attachment already exists; host-local says "duplicate allocation is not
	// allowed".
	ErrDuplicate = errors.New("duplicate allocation")
	// ErrUnavailable: a requested address is taken or outside every range.
	ErrUnavailable = errors.New("requested address unavailable")
	// ErrStore: the data directory or the lease file cannot be used.
	ErrStore = errors.New("lease store unusable")
)

// StateFile is the name of a network's lease file inside <dataDir>/<network>.
const StateFile = "leases.json"

// Lease is one allocated address and its owner.
type Lease struct {
	IP          netip.Addr `json:"ip"`
	ContainerID string     `json:"containerID"`
	IfName      string     `json:"ifName"`
}

// state is the content of the lease file.
type state struct {
	Leases []Lease `json:"leases"`
	// Cursors holds each range set's last allocated address (host-local's last_reserved_ip.N),
	// keyed by the range set's index.
	Cursors map[string]netip.Addr `json:"cursors,omitempty"`
}

// Store is the lease file of one network. Every method holds the file's flock for its whole
// read-modify-write, because each CNI invocation is its own process and the spec lets runtimes run
// invocations for different containers concurrently.
type Store struct {
	f    *os.File
	size int64 // bytes in the file; it is never shrunk (see save)
}

// Open opens (creating it and its directory if needed) the lease file of network under dataDir,
// <dataDir>/<network>/leases.json. network must be one file name (the plugin checks it with the
// CNI rules for network names first). The file is opened through an os.Root of dataDir, so a
// symlink planted under dataDir (a leases.json pointing at another file) cannot make cni-fake
// read or write anything outside it.
func Open(dataDir, network string) (*Store, error) {
	if dataDir == "" {
		return nil, fmt.Errorf("%w: dataDir is empty", ErrStore)
	}
	if network == "" || network == "." || network == ".." || strings.ContainsRune(network, '/') {
		return nil, fmt.Errorf("%w: network name %q is not a file name", ErrStore, network)
	}
	root, err := os.OpenRoot(dataDir)
	if errors.Is(err, fs.ErrNotExist) { // first use: make the directory, once
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStore, err)
		}
		root, err = os.OpenRoot(dataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	defer root.Close() // the lease file stays open without it
	name := network + "/" + StateFile
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir(network, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %v", ErrStore, err)
		}
		f, err = root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrStore, filepath.Join(dataDir, name))
	}
	return &Store{f: f}, nil
}

// Path is the lease file.
func (s *Store) Path() string { return s.f.Name() }

// Close closes the lease file (releasing any lock).
func (s *Store) Close() error { return s.f.Close() }

// update runs f on the current state under the lock and saves the state when f asks to.
func (s *Store) update(f func(st *state) (changed bool, err error)) error {
	fd := int(s.f.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return fmt.Errorf("%w: lock %s: %v", ErrStore, s.f.Name(), err)
		}
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	st, err := s.load()
	if err != nil {
		return err
	}
	changed, err := f(st)
	if err != nil || !changed {
		return err
	}
	return s.save(st)
}

func (s *Store) load() (*state, error) {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	b, err := io.ReadAll(s.f)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrStore, s.f.Name(), err)
	}
	s.size = int64(len(b))
	st := &state{}
	if len(bytes.TrimSpace(b)) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%w: %s is not a lease file: %v", ErrStore, s.f.Name(), err)
	}
	return st, nil
}

// save writes the state over the file in place with one pwrite, padded with spaces to the file's
// current length so that the file never shrinks: truncating would free and later reallocate disk
// blocks on every ADD/DEL pair. JSON ignores the trailing whitespace. Readers and writers hold the
// flock, so nobody sees a half-written file; a writer killed mid-write is the remaining risk,
// accepted for a fake.
func (s *Store) save(st *state) error {
	slices.SortFunc(st.Leases, func(a, b Lease) int { return a.IP.Compare(b.IP) })
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	b = append(b, '\n')
	if pad := s.size - int64(len(b)); pad > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, int(pad))...)
	}
	if _, err := s.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("%w: write %s: %v", ErrStore, s.f.Name(), err)
	}
	s.size = int64(len(b))
	return nil
}

// Allocate gives the attachment one address from every range set of the pool: the requested one
// when a requested address falls in that set, otherwise the next free address after the set's
// round-robin cursor. Either every set gets an address or none does (nothing leaks on failure).
func (s *Store) Allocate(containerID, ifName string, pool Pool, requested []netip.Addr) ([]netip.Addr, error) {
	var out []netip.Addr
	err := s.update(func(st *state) (bool, error) {
		taken := map[netip.Addr]bool{}
		for _, l := range st.Leases {
			taken[l.IP] = true
			if l.ContainerID == containerID && l.IfName == ifName {
				return false, fmt.Errorf("%w: container %s interface %s already holds %s", ErrDuplicate, containerID, ifName, l.IP)
			}
		}
		want := make([]netip.Addr, len(pool.Sets))
		for _, a := range requested {
			i := setOf(pool.Sets, a)
			switch {
			case i < 0:
				return false, fmt.Errorf("%w: %s is in no configured range", ErrUnavailable, a)
			case want[i].IsValid():
				return false, fmt.Errorf("%w: %s and %s are both requested from range set %d", ErrUnavailable, want[i], a, i)
			case taken[a]:
				return false, fmt.Errorf("%w: %s is already allocated", ErrUnavailable, a)
			}
			want[i] = a
		}
		if st.Cursors == nil {
			st.Cursors = map[string]netip.Addr{}
		}
		for i, set := range pool.Sets {
			a := want[i]
			if !a.IsValid() {
				var err error
				if a, err = pick(i, set, st.Cursors[strconv.Itoa(i)], taken); err != nil {
					return false, err // nothing saved: no partial allocation survives
				}
			}
			taken[a] = true
			out = append(out, a)
			st.Cursors[strconv.Itoa(i)] = a
		}
		for _, a := range out {
			st.Leases = append(st.Leases, Lease{IP: a, ContainerID: containerID, IfName: ifName})
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pick finds the first free address after the cursor in range set i, wrapping around once.
func pick(i int, set []Range, cursor netip.Addr, taken map[netip.Addr]bool) (netip.Addr, error) {
	ri, a := start(set, cursor)
	var total uint64
	for _, r := range set {
		total += r.Size() + 1 // +1: the walk also steps over the gateway
	}
	for n := uint64(0); n < total; n++ {
		if set[ri].Contains(a) && !taken[a] {
			return a, nil
		}
		ri, a = next(set, ri, a)
	}
	return netip.Addr{}, fmt.Errorf("%w in range set %d (%s)", ErrExhausted, i, describe(set))
}

// start is where the walk begins: just after the cursor when it lies in a range, else the first
// address of the first range.
func start(set []Range, cursor netip.Addr) (int, netip.Addr) {
	if cursor.IsValid() {
		for ri, r := range set {
			if !cursor.Less(r.Start) && !r.End.Less(cursor) {
				return next(set, ri, cursor)
			}
		}
	}
	return 0, set[0].Start
}

func next(set []Range, ri int, a netip.Addr) (int, netip.Addr) {
	if a == set[ri].End {
		ri = (ri + 1) % len(set)
		return ri, set[ri].Start
	}
	return ri, a.Next()
}

func setOf(sets [][]Range, a netip.Addr) int {
	for i, set := range sets {
		for _, r := range set {
			if r.Contains(a) {
				return i
			}
		}
	}
	return -1
}

func describe(set []Range) string {
	var b []byte
	for i, r := range set {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.Start.String()+"-"+r.End.String()...)
	}
	return string(b)
}

// Leases returns every lease, in address order.
func (s *Store) Leases() ([]Lease, error) {
	var out []Lease
	err := s.update(func(st *state) (bool, error) {
		out = st.Leases
		slices.SortFunc(out, func(a, b Lease) int { return a.IP.Compare(b.IP) })
		return false, nil
	})
	return out, err
}

// Get returns the attachment's leased addresses.
func (s *Store) Get(containerID, ifName string) ([]netip.Addr, error) {
	leases, err := s.Leases()
	var out []netip.Addr
	for _, l := range leases {
		if l.ContainerID == containerID && l.IfName == ifName {
			out = append(out, l.IP)
		}
	}
	return out, err
}

// Release removes the attachment's leases and returns the addresses freed. Releasing nothing is
// not an error: the spec requires DEL to succeed when its work is already undone.
func (s *Store) Release(containerID, ifName string) ([]netip.Addr, error) {
	removed, err := s.removeWhere(func(l Lease) bool { return l.ContainerID == containerID && l.IfName == ifName })
	var out []netip.Addr
	for _, l := range removed {
		out = append(out, l.IP)
	}
	return out, err
}

// GC removes every lease whose attachment valid does not accept, and returns them.
func (s *Store) GC(valid func(containerID, ifName string) bool) ([]Lease, error) {
	return s.removeWhere(func(l Lease) bool { return !valid(l.ContainerID, l.IfName) })
}

func (s *Store) removeWhere(match func(Lease) bool) ([]Lease, error) {
	var out []Lease
	err := s.update(func(st *state) (bool, error) {
		kept := st.Leases[:0]
		for _, l := range st.Leases {
			if match(l) {
				out = append(out, l)
			} else {
				kept = append(kept, l)
			}
		}
		st.Leases = kept
		return len(out) > 0, nil
	})
	return out, err
}

// Status reports whether an ADD could succeed now: the lease file is readable and every range set
// has a free address. (Open already proved the file writable: it opens it read-write.)
func (s *Store) Status(pool Pool) error {
	return s.update(func(st *state) (bool, error) {
		for i, set := range pool.Sets {
			var size, used uint64
			for _, r := range set {
				size += r.Size()
			}
			for _, l := range st.Leases {
				for _, r := range set {
					if r.Contains(l.IP) {
						used++
					}
				}
			}
			if used >= size {
				return false, fmt.Errorf("%w in range set %d (%s): %d of %d addresses leased", ErrExhausted, i, describe(set), used, size)
			}
		}
		return false, nil
	})
}
