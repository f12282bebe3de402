package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func mustPool(t testing.TB, js string) Pool {
	t.Helper()
	p, err := ParseConfig(json.RawMessage(js))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", js, err)
	}
	return p
}

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), "net1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestParseConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{}`, "no address range"},
		{`{"subnet":"10.0.0.0/33"}`, "subnet"},
		{`{"subnet":"10.0.0.0/31"}`, "too small"},
		{`{"subnet":"10.0.0.0/24","rangeStart":"10.0.1.5"}`, "rangeStart 10.0.1.5 is outside"},
		{`{"subnet":"10.0.0.0/24","rangeStart":"10.0.0.9","rangeEnd":"10.0.0.3"}`, "before rangeStart"},
		{`{"subnet":"10.0.0.0/24","gateway":"x"}`, "gateway"},
		{`{"ranges":[[{"subnet":"10.0.0.0/24"},{"subnet":"10.0.0.0/25"}]]}`, "overlap"},
		{`{"ranges":[[{"subnet":"10.0.0.0/24"}],[{"subnet":"10.0.0.0/24"}]]}`, "range sets 0 and 1 overlap"},
		{`{"ranges":[[{"subnet":"10.0.0.0/24"},{"subnet":"fd00::/64"}]]}`, "mix"},
		{`{"subnet":"10.0.0.0/24","routes":[{"dst":"nope"}]}`, "ipam.routes[0].dst"},
		{`{"subnet":"10.0.0.0/24","ranges":[[{"subnet":"10.1.0.0/24"}]]}`, "either"},
		{`{"subnet": 5}`, "ipam:"},
	} {
		_, err := ParseConfig(json.RawMessage(tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestDefaultsFollowHostLocal(t *testing.T) {
	p := mustPool(t, `{"subnet":"10.1.2.0/24"}`)
	r := p.Sets[0][0]
	if r.Start.String() != "10.1.2.1" || r.End.String() != "10.1.2.254" || r.Gateway.String() != "10.1.2.1" {
		t.Fatalf("range = %+v, want 10.1.2.1-10.1.2.254 gw 10.1.2.1", r)
	}
	if r.Size() != 253 {
		t.Fatalf("size %d, want 253", r.Size())
	}
}

func TestAllocateRoundRobinAndRelease(t *testing.T) {
	s := openStore(t)
	pool := mustPool(t, `{"subnet":"10.1.2.0/29"}`) // .1 gateway, .2-.6 allocatable
	var got []string
	for i := range 3 {
		a, err := s.Allocate(fmt.Sprintf("c%d", i), "eth0", pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a[0].String())
	}
	if strings.Join(got, " ") != "10.1.2.2 10.1.2.3 10.1.2.4" {
		t.Fatalf("allocated %v", got)
	}
	// Releasing c0 does not make the next ADD reuse .2 at once: round robin moves on (host-local
	// does this so that a recently freed address is not handed to a new pod straight away).
	if rel, err := s.Release("c0", "eth0"); err != nil || len(rel) != 1 {
		t.Fatalf("release = %v, %v", rel, err)
	}
	if rel, err := s.Release("c0", "eth0"); err != nil || len(rel) != 0 {
		t.Fatalf("repeated release = %v, %v; want nothing and no error", rel, err)
	}
	a, err := s.Allocate("c3", "eth0", pool, nil)
	if err != nil || a[0].String() != "10.1.2.5" {
		t.Fatalf("next = %v, %v; want 10.1.2.5", a, err)
	}
	a, err = s.Allocate("c4", "eth0", pool, nil)
	if err != nil || a[0].String() != "10.1.2.6" {
		t.Fatalf("next = %v, %v; want 10.1.2.6", a, err)
	}
	a, err = s.Allocate("c5", "eth0", pool, nil) // wraps around to the freed .2
	if err != nil || a[0].String() != "10.1.2.2" {
		t.Fatalf("after wrap = %v, %v; want 10.1.2.2", a, err)
	}
	if _, err := s.Allocate("c6", "eth0", pool, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("full pool: err = %v, want ErrExhausted", err)
	}
	if err := s.Status(pool); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Status on a full pool = %v, want ErrExhausted", err)
	}
	if _, err := s.Allocate("c1", "eth0", pool, nil); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second allocation for c1/eth0: err = %v, want ErrDuplicate", err)
	}
	// The same container with another interface is another attachment.
	s.Release("c5", "eth0")
	if _, err := s.Allocate("c1", "net1", pool, nil); err != nil {
		t.Fatalf("c1/net1: %v", err)
	}
}

func TestStateFileIsReadableAndNeverShrinks(t *testing.T) {
	s := openStore(t)
	pool := mustPool(t, `{"subnet":"10.1.2.0/24"}`)
	for _, id := range []string{"abc", "def"} {
		if _, err := s.Allocate(id, "eth0", pool, nil); err != nil {
			t.Fatal(err)
		}
	}
	full, _ := os.ReadFile(s.Path())
	var st struct {
		Leases  []map[string]string `json:"leases"`
		Cursors map[string]string   `json:"cursors"`
	}
	if err := json.Unmarshal(full, &st); err != nil || len(st.Leases) != 2 || st.Leases[0]["containerID"] != "abc" || st.Leases[0]["ip"] != "10.1.2.2" || st.Cursors["0"] != "10.1.2.3" {
		t.Fatalf("lease file = %s (%v)", full, err)
	}
	s.Release("abc", "eth0")
	s.Release("def", "eth0")
	empty, _ := os.ReadFile(s.Path())
	if len(empty) != len(full) || strings.Contains(string(empty), "abc") {
		t.Fatalf("after release: %d bytes (was %d): %q", len(empty), len(full), empty)
	}
	if l, err := s.Leases(); err != nil || len(l) != 0 {
		t.Fatalf("padded file reads back as %v, %v", l, err)
	}
}

func TestCorruptStateFileIsAnError(t *testing.T) {
	s := openStore(t)
	os.WriteFile(s.Path(), []byte("{not json"), 0o600)
	if _, err := s.Leases(); !errors.Is(err, ErrStore) {
		t.Fatalf("err = %v, want ErrStore", err)
	}
}

func TestDualStackAndRequested(t *testing.T) {
	s := openStore(t)
	pool := mustPool(t, `{"ranges":[[{"subnet":"10.9.0.0/24"}],[{"subnet":"fd00:9::/120"}]]}`)
	a, err := s.Allocate("c1", "eth0", pool, []netip.Addr{netip.MustParseAddr("10.9.0.77")})
	if err != nil || len(a) != 2 || a[0].String() != "10.9.0.77" || a[1].String() != "fd00:9::2" {
		t.Fatalf("dual stack = %v, %v", a, err)
	}
	for _, req := range []string{"10.9.0.77", "10.8.0.1", "10.9.0.1"} {
		_, err := s.Allocate("c2", "eth0", pool, []netip.Addr{netip.MustParseAddr(req)})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("request %s: err = %v, want ErrUnavailable", req, err)
		}
	}
	if l, _ := s.Leases(); len(l) != 2 {
		t.Fatalf("failed requests leaked leases: %v", l)
	}
}

func TestExhaustionLeaksNothing(t *testing.T) {
	s := openStore(t)
	// Two range sets; the second is full, so the first set's address must be rolled back.
	pool := mustPool(t, `{"ranges":[[{"subnet":"10.9.0.0/24"}],[{"subnet":"10.8.0.0/30"}]]}`)
	if _, err := s.Allocate("c1", "eth0", pool, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate("c2", "eth0", pool, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	if l, _ := s.Leases(); len(l) != 2 {
		t.Fatalf("leases after a failed allocation: %v, want only c1's two", l)
	}
}

func TestGCKeepsOnlyValid(t *testing.T) {
	s := openStore(t)
	pool := mustPool(t, `{"subnet":"10.1.2.0/24"}`)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Allocate(id, "eth0", pool, nil); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := s.GC(func(id, ifName string) bool { return id == "b" && ifName == "eth0" })
	if err != nil || len(removed) != 2 {
		t.Fatalf("GC removed %v, %v", removed, err)
	}
	l, _ := s.Leases()
	if len(l) != 1 || l[0].ContainerID != "b" {
		t.Fatalf("left %v, want only b", l)
	}
}

// Each Store opens its own descriptor of the lock file, as separate plugin processes do, so this
// exercises the flock between them.
func TestConcurrentAllocationsAreDistinct(t *testing.T) {
	dir := t.TempDir()
	pool := mustPool(t, `{"subnet":"10.50.0.0/24"}`)
	const n = 64
	var wg sync.WaitGroup
	got := make([]netip.Addr, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir, "net")
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			a, err := s.Allocate(fmt.Sprintf("c%d", i), "eth0", pool, nil)
			if err == nil {
				got[i] = a[0]
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	for i, a := range got {
		if errs[i] != nil {
			t.Fatalf("allocation %d: %v", i, errs[i])
		}
		if j, dup := seen[a]; dup {
			t.Fatalf("allocations %d and %d both got %s", j, i, a)
		}
		seen[a] = i
	}
}

func TestStatusReportsUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(file, "net"); !errors.Is(err, ErrStore) {
		t.Fatalf("Open under a regular file: %v, want ErrStore", err)
	}
	if _, err := Open("", "net"); !errors.Is(err, ErrStore) {
		t.Fatalf("Open(\"\"): %v, want ErrStore", err)
	}
}
