package ipam

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/alexflint/go-filemutex"
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
	// ErrStore: the data directory cannot be used (not creatable, not writable, lock failed).
	ErrStore = errors.New("lease store unusable")
)

const (
	lockFile      = "lock"
	cursorPrefix  = "last_reserved_ip."
	leaseFileMode = 0o600
)

// Lease is one allocated address and its owner.
type Lease struct {
	IP          netip.Addr
	ContainerID string
	IfName      string
}

// Store is the lease directory of one network. Every method that reads or changes leases holds
// the directory's flock for its whole duration, because each CNI invocation is its own process and
// the spec lets runtimes run invocations for different containers concurrently.
type Store struct {
	dir  string
	lock *filemutex.FileMutex
}

// Open creates (if needed) and opens <dataDir>/<network>.
func Open(dataDir, network string) (*Store, error) {
	if dataDir == "" {
		return nil, fmt.Errorf("%w: dataDir is empty", ErrStore)
	}
	dir := filepath.Join(dataDir, network)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	m, err := filemutex.New(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("%w: open lock file in %s: %v", ErrStore, dir, err)
	}
	return &Store{dir: dir, lock: m}, nil
}

// Dir is the network's lease directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the lock file descriptor.
func (s *Store) Close() error { return s.lock.Close() }

func (s *Store) locked(f func() error) error {
	if err := s.lock.Lock(); err != nil {
		return fmt.Errorf("%w: lock %s: %v", ErrStore, s.dir, err)
	}
	defer s.lock.Unlock()
	return f()
}

// Allocate gives the attachment one address from every range set of the pool: the requested one
// when a requested address falls in that set, otherwise the next free address after the set's
// round-robin cursor. Either every set gets an address or none does (nothing leaks on failure).
func (s *Store) Allocate(containerID, ifName string, pool Pool, requested []netip.Addr) ([]netip.Addr, error) {
	var out []netip.Addr
	err := s.locked(func() error {
		leases, err := s.scan()
		if err != nil {
			return err
		}
		taken := map[netip.Addr]bool{}
		for _, l := range leases {
			taken[l.IP] = true
			if l.ContainerID == containerID && l.IfName == ifName {
				return fmt.Errorf("%w: container %s interface %s already holds %s", ErrDuplicate, containerID, ifName, l.IP)
			}
		}
		want := make([]netip.Addr, len(pool.Sets))
		for _, a := range requested {
			i := setOf(pool.Sets, a)
			switch {
			case i < 0:
				return fmt.Errorf("%w: %s is in no configured range", ErrUnavailable, a)
			case want[i].IsValid():
				return fmt.Errorf("%w: %s and %s are both requested from range set %d", ErrUnavailable, want[i], a, i)
			case taken[a]:
				return fmt.Errorf("%w: %s is already allocated", ErrUnavailable, a)
			}
			want[i] = a
		}
		var created []netip.Addr
		rollback := func() {
			for _, a := range created {
				os.Remove(filepath.Join(s.dir, a.String()))
			}
		}
		for i, set := range pool.Sets {
			a := want[i]
			if !a.IsValid() {
				a, err = s.pick(i, set, taken)
				if err != nil {
					rollback()
					return err
				}
			}
			if err := s.writeLease(a, containerID, ifName); err != nil {
				rollback()
				return err
			}
			created = append(created, a)
			taken[a] = true
			s.writeCursor(i, a)
		}
		out = created
		return nil
	})
	return out, err
}

// writeCursor records range set i's last allocated address. It overwrites the file in place,
// padded to a fixed width, instead of truncating and rewriting it: on ext4 a truncate+write costs
// about 0.1 ms more, a noticeable share of an invocation that a runtime pays for every pod. The
// cursor is advisory (a lost write only changes where the next search starts), so a failure to
// write it does not fail the allocation; host-local does the same.
func (s *Store) writeCursor(i int, a netip.Addr) {
	f, err := os.OpenFile(filepath.Join(s.dir, cursorPrefix+strconv.Itoa(i)), os.O_WRONLY|os.O_CREATE, leaseFileMode)
	if err != nil {
		return
	}
	// 39 characters hold any IPv6 address; readers trim the padding.
	f.WriteAt([]byte(fmt.Sprintf("%-39s\n", a)), 0)
	f.Close()
}

// pick finds the first free address after range set i's cursor, wrapping around once.
func (s *Store) pick(i int, set []Range, taken map[netip.Addr]bool) (netip.Addr, error) {
	var cursor netip.Addr
	if b, err := os.ReadFile(filepath.Join(s.dir, cursorPrefix+strconv.Itoa(i))); err == nil {
		cursor, _ = netip.ParseAddr(strings.TrimSpace(string(b)))
	}
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
	var parts []string
	for _, r := range set {
		parts = append(parts, r.Start.String()+"-"+r.End.String())
	}
	return strings.Join(parts, ",")
}

func (s *Store) writeLease(a netip.Addr, containerID, ifName string) error {
	// O_EXCL: an existing file means "taken", even if it appeared behind our back (the lock makes
	// that impossible for cni-fake, but not for a human or another tool editing the directory).
	f, err := os.OpenFile(filepath.Join(s.dir, a.String()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, leaseFileMode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s is already allocated", ErrUnavailable, a)
		}
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	_, err = f.WriteString(containerID + "\r\n" + ifName)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// scan reads every lease file. The caller holds the lock.
func (s *Store) scan() ([]Lease, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	var out []Lease
	for _, e := range entries {
		a, err := netip.ParseAddr(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue // lock, last_reserved_ip.N, stray files
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("%w: %v", ErrStore, err)
		}
		// "<id>\r\n<ifname>"; host-local before v0.8 wrote only "<id>".
		id, ifName, _ := strings.Cut(strings.TrimSpace(string(b)), "\r\n")
		out = append(out, Lease{IP: a, ContainerID: strings.TrimSpace(id), IfName: strings.TrimSpace(ifName)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out, nil
}

// Leases returns every lease, in address order.
func (s *Store) Leases() ([]Lease, error) {
	var out []Lease
	err := s.locked(func() (err error) {
		out, err = s.scan()
		return err
	})
	return out, err
}

// Get returns the attachment's leases.
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

// GC removes every lease whose attachment valid does not accept and returns them. It carries on
// past a lease it cannot remove, as the spec asks of GC, and reports those at the end.
func (s *Store) GC(valid func(containerID, ifName string) bool) ([]Lease, error) {
	return s.removeWhere(func(l Lease) bool { return !valid(l.ContainerID, l.IfName) })
}

func (s *Store) removeWhere(match func(Lease) bool) ([]Lease, error) {
	var out []Lease
	err := s.locked(func() error {
		leases, err := s.scan()
		if err != nil {
			return err
		}
		var errs []error
		for _, l := range leases {
			if !match(l) {
				continue
			}
			if err := os.Remove(filepath.Join(s.dir, l.IP.String())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			out = append(out, l)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %v", ErrStore, errors.Join(errs...))
		}
		return nil
	})
	return out, err
}

// Status reports whether an ADD could succeed now: the store is writable and every range set has a
// free address.
func (s *Store) Status(pool Pool) error {
	return s.locked(func() error {
		probe := filepath.Join(s.dir, ".status-probe")
		if err := os.WriteFile(probe, nil, leaseFileMode); err != nil {
			return fmt.Errorf("%w: %s is not writable: %v", ErrStore, s.dir, err)
		}
		os.Remove(probe)
		leases, err := s.scan()
		if err != nil {
			return err
		}
		for i, set := range pool.Sets {
			var size, used uint64
			for _, r := range set {
				size += r.Size()
			}
			for _, l := range leases {
				for _, r := range set {
					if r.Contains(l.IP) {
						used++
					}
				}
			}
			if used >= size {
				return fmt.Errorf("%w in range set %d (%s): %d of %d addresses leased", ErrExhausted, i, describe(set), used, size)
			}
		}
		return nil
	})
}
