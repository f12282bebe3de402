package ipam

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLeaseFile: whatever a lease file holds when an invocation opens it (torn by a crash,
// edited by hand, written by an older cni-fake), the store never panics: each verb either works
// or answers ErrStore naming the file, and after a successful Allocate the attachment holds one
// address of every range set, none of them held by another attachment.
func FuzzLeaseFile(f *testing.F) {
	for _, s := range []string{
		`{"leases":[{"ip":"10.0.0.2","containerID":"a","ifName":"eth0"}],"cursors":{"0":"10.0.0.2"}}`,
		`{"leases":[{"ip":"10.0.0.2","containerID":"a","ifName":"eth0"},{"ip":"10.0.0.2","containerID":"b","ifName":"eth0"}]}`,
		`{"leases":[{"ip":"fd00::1","containerID":"a","ifName":"eth0"}],"cursors":{"1":"10.0.0.3","x":"fd00::ff"}}`,
		`{"leases":[{"ip":"10.0.0.2"`, `   `, `{"leases":null}`, `{"cursors":{"0":"1.2.3.4"}}`, "\x00",
	} {
		f.Add([]byte(s))
	}
	pool, err := ParseConfig(json.RawMessage(`{"ranges":[[{"subnet":"10.0.0.0/29"}],[{"subnet":"fd00::/125"}]]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "net"), 0o755)
		path := filepath.Join(dir, "net", StateFile)
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, "net")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		storeErr := func(op string, err error) bool {
			if err == nil {
				return false
			}
			if !errors.Is(err, ErrStore) && !errors.Is(err, ErrExhausted) && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("%s: untyped error %v", op, err)
			}
			return true
		}
		if _, err := s.Leases(); storeErr("Leases", err) {
			return // unreadable: every verb says so
		}
		storeErr("Status", s.Status(pool))
		got, err := s.Allocate("fuzz", "eth0", pool, []netip.Addr{netip.MustParseAddr("10.0.0.3")})
		if !storeErr("Allocate", err) {
			if len(got) != len(pool.Sets) {
				t.Fatalf("Allocate gave %v for %d range sets", got, len(pool.Sets))
			}
			leases, err := s.Leases()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range got {
				for _, l := range leases {
					if l.IP == a && (l.ContainerID != "fuzz" || l.IfName != "eth0") {
						t.Fatalf("%s given to fuzz/eth0 is also leased to %s/%s", a, l.ContainerID, l.IfName)
					}
				}
			}
		}
		storeErr("Release", func() error { _, err := s.Release("fuzz", "eth0"); return err }())
		storeErr("GC", func() error { _, err := s.GC(func(string, string) bool { return false }); return err }())
	})
}

// FuzzParseConfig: the built-in IPAM's "ipam" object never panics the parser, and every range
// it accepts lies inside its subnet, start before end.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{"subnet":"10.0.0.0/24","rangeStart":"10.0.0.10","rangeEnd":"10.0.0.20","gateway":"10.0.0.1"}`,
		`{"ranges":[[{"subnet":"10.0.0.0/31"}],[{"subnet":"fd00::/127"}]],"routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1"}]}`,
		`{"ranges":[[{"subnet":"10.0.0.0/32"}]]}`, `{"ranges":[[{"subnet":"::/0"}]]}`, `{"ranges":[[]]}`, `{"subnet":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseConfig(raw)
		if err != nil {
			return
		}
		for _, set := range p.Sets {
			for _, r := range set {
				if r.End.Less(r.Start) || !r.Subnet.Contains(r.Start) || !r.Subnet.Contains(r.End) {
					t.Fatalf("accepted range %+v from %s", r, raw)
				}
				_ = r.Size()
			}
		}
	})
}
