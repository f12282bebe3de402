package plugin

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
)

// rangeOf finds the configured range an allocated address came from (for its prefix length and
// gateway).
func rangeOf(pool ipam.Pool, a netip.Addr) ipam.Range {
	for _, set := range pool.Sets {
		for _, r := range set {
			if r.Subnet.Contains(a) {
				return r
			}
		}
	}
	return ipam.Range{Subnet: netip.PrefixFrom(a, a.BitLen())}
}

// addrFromIPConfig reads a delegated IPAM's address. host-local always gives a gateway; when an
// IPAM gives none, the subnet's first address is used, as host-local's default would be.
func addrFromIPConfig(ipc *current.IPConfig) (link.Addr, error) {
	p, ok := prefixFromIPNet(&ipc.Address)
	if !ok {
		return link.Addr{}, fmt.Errorf("delegated IPAM returned an invalid address %v", ipc.Address)
	}
	gw, ok := netip.AddrFromSlice(ipc.Gateway)
	if !ok {
		gw = p.Masked().Addr().Next()
	}
	return link.Addr{Prefix: p, Gateway: gw.Unmap()}, nil
}

func prefixFromIPNet(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	if a.Is4() && bits == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	ip := net.IP(p.Addr().AsSlice())
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func gatewayFor(addrs []link.Addr, v4 bool) netip.Addr {
	for _, a := range addrs {
		if a.Prefix.Addr().Is4() == v4 {
			return a.Gateway
		}
	}
	return netip.Addr{}
}

// mergeDNS applies the "dns" capability (the pod's DNS config from the CRI) over the config's dns.
func mergeDNS(conf types.DNS, rc *RuntimeDNS) types.DNS {
	if rc == nil {
		return conf
	}
	out := conf
	if len(rc.Servers) > 0 {
		out.Nameservers = rc.Servers
	}
	if len(rc.Searches) > 0 {
		out.Search = rc.Searches
	}
	if len(rc.Options) > 0 {
		out.Options = rc.Options
	}
	return out
}

// podMAC is the fake pod interface's MAC: 0a:58 followed by the IPv4 address (the convention of
// Kubernetes' kubenet and OVN-Kubernetes, so the MAC tells which pod it is), else a hash.
func podMAC(addrs []link.Addr, seed string) string {
	for _, a := range addrs {
		if ip := a.Prefix.Addr(); ip.Is4() {
			b := ip.As4()
			return net.HardwareAddr{0x0a, 0x58, b[0], b[1], b[2], b[3]}.String()
		}
	}
	return hashMAC("pod/" + seed)
}

// hostMAC is the fake host veth's MAC, stable per attachment.
func hostMAC(hostName string) string { return hashMAC("host/" + hostName) }

func hashMAC(seed string) string {
	h := fnv.New64a()
	h.Write([]byte(seed))
	s := h.Sum64()
	mac := net.HardwareAddr{byte(s >> 40), byte(s >> 32), byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}
	mac[0] = mac[0]&0xfe | 0x02 // unicast, locally administered
	return mac.String()
}
