// Package link is cni-fake's veth mode: a real veth pair from the plugin's network namespace (the
// "host") into CNI_NETNS, addressed and routed the way the ptp plugin does it
// (containernetworking/plugins plugins/main/ptp), so a packet DNAT'd by the real portmap plugin
// reaches a listener in the pod.
//
// It uses netlink directly rather than plugins/pkg/ip: that package links nftables, iptables and
// ethtool support, which would slow down every exec of the plugin, in fake mode too.
package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Typed errors for the plugin to map onto CNI codes.
var (
	// ErrNetNS: CNI_NETNS cannot be opened as a network namespace.
	ErrNetNS = errors.New("cannot open network namespace")
	// ErrExists: the interface (or the host-side veth) already exists.
	ErrExists = errors.New("interface already exists")
	// ErrMissing: CHECK found an interface or address missing.
	ErrMissing = errors.New("missing")
)

// Addr is one address of the pod interface and the gateway traffic is routed through.
type Addr struct {
	Prefix  netip.Prefix // the pod address with the subnet's length, e.g. 10.88.0.5/16
	Gateway netip.Addr
}

// Route is a route installed in the pod via the gateway of its family.
type Route struct {
	Dst netip.Prefix
	GW  netip.Addr // zero: the gateway of Dst's family
}

// Config describes one attachment.
type Config struct {
	NetNS    string // CNI_NETNS
	IfName   string // CNI_IFNAME, the pod side
	HostName string // the host-side veth name
	MTU      int
	// Alias is stored on the host veth (IFLA_IFALIAS) so that GC can tell which attachment a veth
	// belongs to without any state file.
	Alias  string
	Addrs  []Addr
	Routes []Route
}

// Iface is a created interface as the CNI result reports it.
type Iface struct {
	Name string
	MAC  string
}

// Setup creates the veth pair, addresses and routes. On failure nothing is left behind.
func Setup(c Config) (host, pod Iface, retErr error) {
	hostNS, err := ns.GetCurrentNS()
	if err != nil {
		return host, pod, err
	}
	defer hostNS.Close()
	podNS, err := ns.GetNS(c.NetNS)
	if err != nil {
		return host, pod, fmt.Errorf("%w %q: %v", ErrNetNS, c.NetNS, err)
	}
	defer podNS.Close()
	if _, err := netlinksafe.LinkByName(c.HostName); err == nil {
		return host, pod, fmt.Errorf("%w: host veth %s (a previous ADD of this attachment was not deleted)", ErrExists, c.HostName)
	}

	created := false
	err = podNS.Do(func(ns.NetNS) error {
		if _, err := netlinksafe.LinkByName(c.IfName); err == nil {
			return fmt.Errorf("%w: %s in %s", ErrExists, c.IfName, c.NetNS)
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: c.IfName, MTU: c.MTU},
			PeerName:      c.HostName,
			PeerNamespace: netlink.NsFd(int(hostNS.Fd())),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("create veth %s/%s: %v", c.IfName, c.HostName, err)
		}
		created = true
		l, err := netlinksafe.LinkByName(c.IfName)
		if err != nil {
			return err
		}
		pod = Iface{Name: c.IfName, MAC: l.Attrs().HardwareAddr.String()}
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %v", c.IfName, err)
		}
		return configurePod(l, c)
	})
	if err != nil {
		if created { // deleting the pod side deletes its peer too
			_ = podNS.Do(func(ns.NetNS) error { return deleteByName(c.IfName) })
		}
		return host, pod, err
	}
	defer func() {
		if retErr != nil {
			_ = podNS.Do(func(ns.NetNS) error { return deleteByName(c.IfName) })
			_ = deleteByName(c.HostName)
		}
	}()

	hl, err := netlinksafe.LinkByName(c.HostName)
	if err != nil {
		return host, pod, fmt.Errorf("host veth %s: %v", c.HostName, err)
	}
	host = Iface{Name: c.HostName, MAC: hl.Attrs().HardwareAddr.String()}
	if err := netlink.LinkSetAlias(hl, c.Alias); err != nil {
		return host, pod, fmt.Errorf("set alias of %s: %v", c.HostName, err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return host, pod, fmt.Errorf("set %s up: %v", c.HostName, err)
	}
	for _, a := range c.Addrs {
		// ptp's host side: the gateway address as a /32 (/128) on the host veth, and a host route
		// to the pod address through it. Several host veths may carry the same gateway address.
		gw := netip.PrefixFrom(a.Gateway, a.Gateway.BitLen())
		ga := addrOf(gw)
		if !gw.Addr().Is4() {
			ga.Flags = syscall.IFA_F_NODAD // usable at once, like the pod side
		}
		if err := netlink.AddrAdd(hl, ga); err != nil && !errors.Is(err, syscall.EEXIST) {
			return host, pod, fmt.Errorf("add %s to %s: %v", gw, c.HostName, err)
		}
		dst := netip.PrefixFrom(a.Prefix.Addr(), a.Prefix.Addr().BitLen())
		r := &netlink.Route{LinkIndex: hl.Attrs().Index, Dst: ipNet(dst), Scope: netlink.SCOPE_LINK}
		if err := netlink.RouteAdd(r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return host, pod, fmt.Errorf("add host route to %s via %s: %v", dst, c.HostName, err)
		}
		enableForwarding(a.Prefix.Addr().Is4())
	}
	return host, pod, nil
}

// configurePod runs inside the pod namespace. The scheme is ptp's: the pod address keeps its subnet
// length, the automatic subnet route is replaced by "gw/32 dev ifname" plus "subnet via gw", so
// every packet goes to the host side (veth does not support IFF_POINTOPOINT).
func configurePod(l netlink.Link, c Config) error {
	gws := map[bool]netip.Addr{}
	for _, a := range c.Addrs {
		na := addrOf(a.Prefix)
		if !a.Prefix.Addr().Is4() {
			na.Flags = syscall.IFA_F_NODAD // no duplicate address detection delay on a fresh pair
		}
		if err := netlink.AddrAdd(l, na); err != nil {
			return fmt.Errorf("add %s to %s: %v", a.Prefix, c.IfName, err)
		}
		subnet := a.Prefix.Masked()
		_ = netlink.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(subnet), Scope: netlink.SCOPE_NOWHERE})
		src := net.IP(a.Prefix.Addr().AsSlice())
		for _, r := range []netlink.Route{
			{LinkIndex: l.Attrs().Index, Dst: ipNet(netip.PrefixFrom(a.Gateway, a.Gateway.BitLen())), Scope: netlink.SCOPE_LINK, Src: src},
			{LinkIndex: l.Attrs().Index, Dst: ipNet(subnet), Gw: a.Gateway.AsSlice(), Src: src},
		} {
			if err := netlink.RouteAdd(&r); err != nil && !errors.Is(err, syscall.EEXIST) {
				return fmt.Errorf("add route %s in pod: %v", r.Dst, err)
			}
		}
		if _, ok := gws[a.Prefix.Addr().Is4()]; !ok {
			gws[a.Prefix.Addr().Is4()] = a.Gateway
		}
	}
	for _, rt := range c.Routes {
		gw := rt.GW
		if !gw.IsValid() {
			gw = gws[rt.Dst.Addr().Is4()]
		}
		if !gw.IsValid() {
			continue // no address of that family: nothing to route through
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(rt.Dst), Gw: gw.AsSlice()}
		if err := netlink.RouteAdd(r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("add route %s via %s in pod: %v", rt.Dst, gw, err)
		}
	}
	return nil
}

// Teardown removes the pair. Everything already gone is success (the spec's DEL rule): an empty
// or vanished CNI_NETNS (containerd sends "" once the netns is closed), a missing interface.
func Teardown(netnsPath, ifName, hostName, alias string) error {
	if netnsPath != "" {
		podNS, err := ns.GetNS(netnsPath)
		if err == nil {
			err = podNS.Do(func(ns.NetNS) error { return deleteByName(ifName) })
			podNS.Close()
			if err != nil {
				return err
			}
		}
	}
	// When the netns went away first the kernel already destroyed the pair; otherwise deleting the
	// pod side took the host side with it. Only a stray host veth carrying our alias is left to
	// remove (never a same-named link somebody else made).
	if l, err := netlinksafe.LinkByName(hostName); err == nil && l.Attrs().Alias == alias {
		if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete host veth %s: %v", hostName, err)
		}
	}
	return nil
}

// Check verifies that the pod interface exists in the netns with every address, and that the host
// veth exists.
func Check(netnsPath, ifName, hostName string, addrs []netip.Prefix) error {
	podNS, err := ns.GetNS(netnsPath)
	if err != nil {
		return fmt.Errorf("%w %q: %v", ErrNetNS, netnsPath, err)
	}
	defer podNS.Close()
	err = podNS.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("%w: interface %s in %s", ErrMissing, ifName, netnsPath)
		}
		if l.Type() != "veth" {
			return fmt.Errorf("%w: %s in %s is a %s, not a veth", ErrMissing, ifName, netnsPath, l.Type())
		}
		have, err := netlinksafe.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, want := range addrs {
			found := false
			for _, h := range have {
				if p, ok := prefixOf(h.IPNet); ok && p == want {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%w: address %s on %s in %s", ErrMissing, want, ifName, netnsPath)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := netlinksafe.LinkByName(hostName); err != nil {
		return fmt.Errorf("%w: host veth %s", ErrMissing, hostName)
	}
	return nil
}

// Owned lists the host veths whose alias starts with prefix, keyed by name, valued by alias.
func Owned(prefix string) (map[string]string, error) {
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range links {
		if a := l.Attrs().Alias; strings.HasPrefix(a, prefix) && l.Type() == "veth" {
			out[l.Attrs().Name] = a
		}
	}
	return out, nil
}

// Delete removes a host veth (its pod side goes with it).
func Delete(name string) error { return deleteByName(name) }

func deleteByName(name string) error {
	l, err := netlinksafe.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %v", name, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOENT)
}

func enableForwarding(v4 bool) {
	// As ptp does (ip.EnableForward): the host namespace must forward for traffic that enters it
	// from elsewhere to reach the pod. Written in the plugin's own (host) namespace only.
	p := "/proc/sys/net/ipv6/conf/all/forwarding"
	if v4 {
		p = "/proc/sys/net/ipv4/ip_forward"
	}
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
		return
	}
	_ = os.WriteFile(p, []byte("1"), 0o644)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func addrOf(p netip.Prefix) *netlink.Addr { return &netlink.Addr{IPNet: ipNet(p)} }

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
