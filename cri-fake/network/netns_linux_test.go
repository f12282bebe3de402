package network

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRealNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating network namespaces needs root")
	}
	m := NetNSManager{Dir: t.TempDir(), Mode: NetNSReal}
	p, err := m.Create("0123456789abcdef0123456789abcdef0123")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(p) })
	var ours, theirs unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &ours); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(p, &theirs); err != nil {
		t.Fatal(err)
	}
	if ours.Ino == theirs.Ino {
		t.Fatal("the new namespace is the test's own")
	}
	if err := m.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("netns file left behind: %v", err)
	}
	if err := m.Remove(p); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

func TestPlaceholderNetNS(t *testing.T) {
	m := NetNSManager{Dir: filepath.Join(t.TempDir(), "netns")}
	p, err := m.Create("abc")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("placeholder %s: %v", p, err)
	}
	if err := m.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := (NetNSManager{Dir: t.TempDir(), Mode: "bogus"}).Create("x"); err == nil {
		t.Fatal("bogus mode accepted")
	}
}
