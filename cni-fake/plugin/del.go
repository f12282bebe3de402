package plugin

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
)

// cmdDel undoes ADD. The spec's DEL rules shape it: it must succeed when there is nothing left to
// undo (a repeated DEL, a DEL after a failed ADD), when CNI_NETNS is empty or gone (containerd
// sends "" once the sandbox's netns is closed) and when prevResult is missing (libcni caches
// results only after a whole chain succeeded, and never below cniVersion 0.4.0). So DEL works from
// the container ID and interface name alone.
func (p *Call) cmdDel(args *skel.CmdArgs, conf *NetConf, _ cniArgs) error {
	// The interface goes first: releasing the address while a veth still carries it would let the
	// next ADD hand out an address that is still in use. If teardown fails the runtime retries DEL.
	if conf.Mode == ModeVeth {
		hostName := HostIfName(conf.HostIfPrefix, conf.Name, args.ContainerID, args.IfName)
		if err := link.Teardown(args.Netns, args.IfName, hostName, hostAlias(conf.Name, args.ContainerID, args.IfName)); err != nil {
			return err
		}
	}
	if conf.delegated() {
		_, err := delegate(p.ctx, "DEL", conf.IPAM.Type, args.StdinData, p.env)
		return err
	}
	// A network directory that was never created holds no lease: nothing to release, and no
	// reason to fail DEL because the data directory cannot be created.
	if _, err := os.Stat(filepath.Join(conf.DataDir, conf.Name)); errors.Is(err, fs.ErrNotExist) {
		p.attr("released", "")
		return nil
	}
	store, err := ipam.Open(conf.DataDir, conf.Name)
	if err != nil {
		return err
	}
	defer store.Close()
	released, err := store.Release(args.ContainerID, args.IfName)
	p.attr("released", joinAddrs(released))
	return err
}

func joinAddrs(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}
