package plugin

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
)

// cmdCheck verifies that what ADD made is still there. The runtime passes the cached final result
// of the chain as prevResult (libcni: always, for cniVersion >= 0.4.0; skel refuses CHECK below
// that with code 1). The spec asks the plugin to check what it created and what it tracks (address
// reservations), to delegate CHECK to its IPAM, and to tolerate changes made by later plugins in
// the chain: only the pod interface's entry in prevResult is compared.
func (p *Call) cmdCheck(args *skel.CmdArgs, conf *NetConf, _ cniArgs) error {
	var want []netip.Prefix // the pod interface's addresses according to prevResult
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		prev, err := current.NewResultFromResult(conf.PrevResult)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		idx := slices.IndexFunc(prev.Interfaces, func(i *current.Interface) bool {
			return i.Name == args.IfName && i.Sandbox == args.Netns
		})
		if idx < 0 {
			return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("prevResult has no interface %s with sandbox %s", args.IfName, args.Netns), "")
		}
		for _, ipc := range prev.IPs {
			if ipc.Interface != nil && *ipc.Interface == idx {
				if pf, ok := prefixFromIPNet(&ipc.Address); ok {
					want = append(want, pf)
				}
			}
		}
	}

	if conf.delegated() {
		if _, err := delegate(p.ctx, "CHECK", conf.IPAM.Type, args.StdinData, p.env); err != nil {
			return err
		}
	} else {
		store, err := ipam.Open(conf.DataDir, conf.Name)
		if err != nil {
			return err
		}
		defer store.Close()
		leased, err := store.Get(args.ContainerID, args.IfName)
		if err != nil {
			return err
		}
		if len(leased) == 0 {
			return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("no address lease for container %s interface %s in network %s", args.ContainerID, args.IfName, conf.Name), "")
		}
		for _, w := range want {
			if !slices.Contains(leased, w.Addr()) {
				return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("prevResult address %s is not leased to container %s interface %s (leases: %s)", w, args.ContainerID, args.IfName, joinAddrs(leased)), "")
			}
		}
		if want == nil { // no prevResult: check the interface against the leases
			pool, err := conf.pool()
			if err != nil {
				return err
			}
			for _, a := range leased {
				want = append(want, netip.PrefixFrom(a, rangeOf(pool, a).Subnet.Bits()))
			}
		}
	}
	if conf.Mode == ModeVeth {
		hostName := HostIfName(conf.HostIfPrefix, conf.Name, args.ContainerID, args.IfName)
		return link.Check(args.Netns, args.IfName, hostName, want)
	}
	return nil
}
