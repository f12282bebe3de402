package plugin

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
)

// cmdAdd allocates the attachment's addresses, makes (veth) or describes (fake) its interfaces and
// prints the result in the requested cniVersion. Whatever fails, nothing is left allocated: the
// runtime's DEL after a failed ADD (which the spec requires) then finds nothing, which is fine.
func (p *Call) cmdAdd(args *skel.CmdArgs, conf *NetConf, ca cniArgs) (retErr error) {

	// 1. Addresses: from the built-in allocator, or from the delegated IPAM plugin.
	var (
		addrs   []link.Addr
		routes  []link.Route
		dns     = conf.DNS
		release func()
	)
	if conf.delegated() {
		r, err := delegateAdd(p.ctx, conf, args.StdinData, p.env)
		if err != nil {
			return err
		}
		release = func() { delegate(p.ctx, "DEL", conf.IPAM.Type, args.StdinData, p.env) }
		for _, ipc := range r.IPs {
			a, err := addrFromIPConfig(ipc)
			if err != nil {
				release()
				return err
			}
			addrs = append(addrs, a)
		}
		for _, rt := range r.Routes {
			if dst, ok := prefixFromIPNet(&rt.Dst); ok {
				gw, _ := netip.AddrFromSlice(rt.GW)
				routes = append(routes, link.Route{Dst: dst, GW: gw.Unmap()})
			}
		}
		if len(dns.Nameservers) == 0 {
			dns = r.DNS
		}
	} else {
		pool, err := conf.pool()
		if err != nil {
			return err
		}
		requested, err := conf.requestedIPs(ca)
		if err != nil {
			return err
		}
		store, err := ipam.Open(conf.DataDir, conf.Name)
		if err != nil {
			return err
		}
		defer store.Close()
		got, err := store.Allocate(args.ContainerID, args.IfName, pool, requested)
		if err != nil {
			return err
		}
		release = func() { store.Release(args.ContainerID, args.IfName) }
		for _, a := range got {
			r := rangeOf(pool, a)
			addrs = append(addrs, link.Addr{Prefix: netip.PrefixFrom(a, r.Subnet.Bits()), Gateway: r.Gateway})
		}
		for _, rt := range pool.Routes {
			routes = append(routes, link.Route{Dst: rt.Dst, GW: rt.GW})
		}
	}
	defer func() {
		if retErr != nil {
			release()
		}
	}()

	// 2. Interfaces: real ones in veth mode, described ones in fake mode.
	hostName := HostIfName(conf.HostIfPrefix, conf.Name, args.ContainerID, args.IfName)
	var hostIf, podIf link.Iface
	var err error
	if conf.Mode == ModeVeth {
		alias := hostAlias(conf.Name, args.ContainerID, args.IfName)
		hostIf, podIf, err = link.Setup(link.Config{
			NetNS: args.Netns, IfName: args.IfName, HostName: hostName, MTU: conf.MTU,
			Alias: alias, Addrs: addrs, Routes: routes,
		})
		if err != nil {
			return err
		}
		defer func() {
			if retErr != nil {
				link.Teardown(args.Netns, args.IfName, hostName, alias)
			}
		}()
	} else {
		hostIf = link.Iface{Name: hostName, MAC: hostMAC(hostName)}
		podIf = link.Iface{Name: args.IfName, MAC: podMAC(addrs, hostName)}
	}

	// 3. The result, shaped like ptp's: [host veth (no sandbox), pod interface (sandbox =
	// CNI_NETNS)], every address pointing at index 1. portmap picks the address whose interface
	// is CNI_IFNAME with a sandbox; containerd wants CNI_IFNAME ("eth0") with an address.
	result := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostIf.Name, Mac: hostIf.MAC, Mtu: conf.MTU},
			{Name: podIf.Name, Mac: podIf.MAC, Mtu: conf.MTU, Sandbox: args.Netns},
		},
		DNS: mergeDNS(dns, conf.RuntimeConfig.DNS),
	}
	var ips []string
	for _, a := range addrs {
		result.IPs = append(result.IPs, &current.IPConfig{
			Interface: current.Int(1),
			Address:   *ipNet(a.Prefix),
			Gateway:   net.IP(a.Gateway.AsSlice()),
		})
		ips = append(ips, a.Prefix.String())
	}
	for _, rt := range routes {
		gw := rt.GW
		if !gw.IsValid() {
			gw = gatewayFor(addrs, rt.Dst.Addr().Is4())
		}
		r := &types.Route{Dst: *ipNet(rt.Dst)}
		if gw.IsValid() {
			r.GW = net.IP(gw.AsSlice())
		}
		result.Routes = append(result.Routes, r)
	}
	p.attr("ips", strings.Join(ips, ","))
	p.attr("hostVeth", hostIf.Name)
	if n := len(conf.RuntimeConfig.PortMappings); n > 0 {
		p.attr("portMappings", fmt.Sprint(n))
	}
	if bw := conf.RuntimeConfig.Bandwidth; bw != nil {
		p.attr("bandwidth", fmt.Sprintf("ingress=%d/%d egress=%d/%d", bw.IngressRate, bw.IngressBurst, bw.EgressRate, bw.EgressBurst))
	}
	return p.print(result, conf.CNIVersion)
}
