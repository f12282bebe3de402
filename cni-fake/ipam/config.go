// Package ipam is cni-fake's built-in address management: host-local's guarantees (leases keyed by
// container ID and interface name, a lease store under a file lock so concurrent invocations never
// hand out the same address, round-robin allocation, a repeatable release) plus the GC and STATUS
// that host-local still lacks (containernetworking/plugins#1047).
//
// The store is one JSON file per network, <dataDir>/<network>/leases.json, which is also the
// flock(2) lock. host-local instead keeps one file per address, created with O_EXCL; that costs a
// file creation and a removal per pod, which on a disk filesystem is a quarter of a whole CNI
// invocation, and a plugin is exec'd for every pod sandbox.
package ipam

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Config is the "ipam" object of the plugin entry when cni-fake manages addresses itself
// ("type": "cni-fake", or no type). It uses host-local's keys, so a host-local "ipam" object can be
// switched to the built-in allocator by changing only its type.
type Config struct {
	Type string `json:"type,omitempty"`
	// Ranges is a list of range sets; one address is allocated from each set (so one v4 set and
	// one v6 set give a dual-stack pod).
	Ranges []RangeSet `json:"ranges,omitempty"`
	// Subnet, RangeStart, RangeEnd and Gateway are host-local's single-range shorthand.
	Subnet     string `json:"subnet,omitempty"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
	// Routes are returned in the result (and installed in the pod in veth mode) via the gateway.
	Routes []Route `json:"routes,omitempty"`
}

// Route is a route in host-local's config shape.
type Route struct {
	Dst string `json:"dst"`
	GW  string `json:"gw,omitempty"`
}

// RangeSet is a list of ranges that together form one pool.
type RangeSet []RangeConfig

// RangeConfig is one range in host-local's config shape.
type RangeConfig struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

// Range is a parsed, validated range: addresses Start..End of Subnet, never the Gateway.
type Range struct {
	Subnet  netip.Prefix
	Start   netip.Addr
	End     netip.Addr
	Gateway netip.Addr
}

// Pool is the parsed allocation plan: the range sets and the routes.
type Pool struct {
	Sets   [][]Range
	Routes []ParsedRoute
}

// ParsedRoute is a validated route; GW is the zero Addr for "via the range's gateway".
type ParsedRoute struct {
	Dst netip.Prefix
	GW  netip.Addr
}

// ParseConfig reads and validates the built-in IPAM configuration. The error names the key at fault.
func ParseConfig(raw json.RawMessage) (Pool, error) {
	var c Config
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return Pool{}, fmt.Errorf("ipam: %v", err)
		}
	}
	sets := c.Ranges
	if c.Subnet != "" {
		if len(sets) > 0 {
			return Pool{}, fmt.Errorf("ipam: give either ipam.subnet or ipam.ranges, not both")
		}
		sets = []RangeSet{{{Subnet: c.Subnet, RangeStart: c.RangeStart, RangeEnd: c.RangeEnd, Gateway: c.Gateway}}}
	}
	if len(sets) == 0 {
		return Pool{}, fmt.Errorf("ipam: no address range: set ipam.subnet or ipam.ranges (for example \"ranges\": [[{\"subnet\": \"10.88.0.0/16\"}]])")
	}
	var p Pool
	for i, set := range sets {
		if len(set) == 0 {
			return Pool{}, fmt.Errorf("ipam.ranges[%d]: empty range set", i)
		}
		var parsed []Range
		for j, rc := range set {
			r, err := parseRange(rc)
			if err != nil {
				return Pool{}, fmt.Errorf("ipam.ranges[%d][%d]: %v", i, j, err)
			}
			for k, other := range parsed {
				if r.Start.Is4() != other.Start.Is4() {
					return Pool{}, fmt.Errorf("ipam.ranges[%d]: ranges %d and %d mix IPv4 and IPv6", i, k, j)
				}
				if r.overlaps(other) {
					return Pool{}, fmt.Errorf("ipam.ranges[%d]: ranges %d and %d overlap", i, k, j)
				}
			}
			parsed = append(parsed, r)
		}
		for k, other := range p.Sets {
			for _, a := range parsed {
				for _, b := range other {
					if a.overlaps(b) {
						return Pool{}, fmt.Errorf("ipam.ranges: range sets %d and %d overlap", k, i)
					}
				}
			}
		}
		p.Sets = append(p.Sets, parsed)
	}
	for i, rt := range c.Routes {
		dst, err := netip.ParsePrefix(rt.Dst)
		if err != nil {
			return Pool{}, fmt.Errorf("ipam.routes[%d].dst: %q is not a CIDR", i, rt.Dst)
		}
		pr := ParsedRoute{Dst: dst.Masked()}
		if rt.GW != "" {
			if pr.GW, err = netip.ParseAddr(rt.GW); err != nil {
				return Pool{}, fmt.Errorf("ipam.routes[%d].gw: %q is not an IP address", i, rt.GW)
			}
		}
		p.Routes = append(p.Routes, pr)
	}
	return p, nil
}

func parseRange(rc RangeConfig) (Range, error) {
	subnet, err := netip.ParsePrefix(rc.Subnet)
	if err != nil {
		return Range{}, fmt.Errorf("subnet: %q is not a CIDR", rc.Subnet)
	}
	subnet = subnet.Masked()
	bits := subnet.Addr().BitLen()
	// host-local refuses /31 and /32 (/127, /128): there is no room for a gateway and a pod.
	if subnet.Bits() > bits-2 {
		return Range{}, fmt.Errorf("subnet %s is too small (at most /%d)", subnet, bits-2)
	}
	r := Range{Subnet: subnet}
	// Like host-local: the default start skips the network address, the default end skips the IPv4
	// broadcast address, and the default gateway is the first address.
	r.Start = subnet.Addr().Next()
	r.End = lastAddr(subnet)
	if subnet.Addr().Is4() {
		r.End = r.End.Prev()
	}
	r.Gateway = r.Start
	for _, f := range []struct {
		key string
		val string
		dst *netip.Addr
	}{{"rangeStart", rc.RangeStart, &r.Start}, {"rangeEnd", rc.RangeEnd, &r.End}, {"gateway", rc.Gateway, &r.Gateway}} {
		if f.val == "" {
			continue
		}
		a, err := netip.ParseAddr(f.val)
		if err != nil {
			return Range{}, fmt.Errorf("%s: %q is not an IP address", f.key, f.val)
		}
		if !subnet.Contains(a) {
			return Range{}, fmt.Errorf("%s %s is outside subnet %s", f.key, a, subnet)
		}
		*f.dst = a
	}
	if r.End.Less(r.Start) {
		return Range{}, fmt.Errorf("rangeEnd %s is before rangeStart %s", r.End, r.Start)
	}
	return r, nil
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (r Range) overlaps(o Range) bool {
	return r.Start.Is4() == o.Start.Is4() && !(r.End.Less(o.Start) || o.End.Less(r.Start))
}

// Contains reports whether a is allocatable from r.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() == r.Start.Is4() && !a.Less(r.Start) && !r.End.Less(a) && a != r.Gateway
}

// Size is the number of allocatable addresses (capped, for IPv6).
func (r Range) Size() uint64 {
	var n uint64
	s, e := r.Start.As16(), r.End.As16()
	for i := 0; i < 16; i++ {
		if n > 1<<40 {
			return 1 << 48
		}
		n = n<<8 + uint64(e[i]) - uint64(s[i])
	}
	n++
	if r.Gateway.IsValid() && !r.Gateway.Less(r.Start) && !r.End.Less(r.Gateway) {
		n--
	}
	return n
}
