package plugin

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/ipam"
)

// cmdStatus answers whether an ADD could succeed now (spec 1.1 STATUS; containerd polls it through
// the CRI Status call and reports NetworkReady=false when it fails). Code 50, "plugin not
// available", when it could not: the data directory is unusable, the pool is exhausted, or veth
// mode runs without root. A delegated IPAM's STATUS is forwarded, as the spec requires.
func (p *Call) cmdStatus(args *skel.CmdArgs, conf *NetConf, _ cniArgs) error {
	notAvailable := func(format string, a ...any) error {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf(format, a...), "")
	}
	if conf.Mode == ModeVeth && os.Geteuid() != 0 {
		return notAvailable("mode veth needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create interfaces; running as uid %d", os.Geteuid())
	}
	if conf.delegated() {
		_, err := delegate(p.ctx, "STATUS", conf.IPAM.Type, args.StdinData, p.env)
		return err
	}
	pool, err := conf.pool()
	if err != nil {
		return err
	}
	store, err := ipam.Open(conf.DataDir, conf.Name)
	if err != nil {
		return notAvailable("dataDir %s: %v", conf.DataDir, err)
	}
	defer store.Close()
	if err := store.Status(pool); err != nil {
		return notAvailable("%v", err)
	}
	return nil
}
