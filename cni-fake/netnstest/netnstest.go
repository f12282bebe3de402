// Package netnstest gives kernel-touching tests the throw-away network namespaces the project's
// rules require: a namespace made by the test itself, with only a loopback interface (so no route
// out of the machine), removed when the test ends.
package netnstest

import (
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// RequireRoot skips the test, saying why, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces, veth pairs and iptables rules (CI runs it as root)")
	}
}

// New creates a bind-mounted namespace under /var/run/netns with its loopback up, and removes it
// (and so every interface and netfilter rule in it) when the test ends.
func New(t testing.TB) ns.NetNS {
	t.Helper()
	RequireRoot(t)
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create network namespace: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		testutils.UnmountNS(n)
	})
	err = n.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatalf("loopback up in %s: %v", n.Path(), err)
	}
	return n
}

// Links lists the interface names in a namespace.
func Links(t testing.TB, n ns.NetNS) []string {
	t.Helper()
	var names []string
	err := n.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Do runs f with the calling goroutine's OS thread in n, failing the test on error. Processes
// exec'd from f (a CNI runtime's plugins, iptables) start in n too: they inherit the thread's
// namespace.
func Do(t testing.TB, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}
