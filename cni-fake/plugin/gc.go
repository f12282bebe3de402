package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/cni-fake/link"
)

// cmdGC releases every lease (and, in veth mode, every host veth) of this network whose attachment
// is not in cni.dev/valid-attachments (spec 1.1 GC). libcni also sends the list under the key the
// spec first used, cni.dev/attachments (cni#1101); both are read. GC carries on past a failure and
// reports all of them at the end, and is forwarded to a delegated IPAM.
func (p *Call) cmdGC(args *skel.CmdArgs, conf *NetConf, _ cniArgs) error {
	var old struct {
		Attachments []types.GCAttachment `json:"cni.dev/attachments"`
	}
	_ = json.Unmarshal(args.StdinData, &old)
	valid := map[types.GCAttachment]bool{}
	for _, a := range append(conf.ValidAttachments, old.Attachments...) {
		valid[a] = true
	}
	isValid := func(id, ifName string) bool { return valid[types.GCAttachment{ContainerID: id, IfName: ifName}] }

	var errs []error
	var removed []string
	if conf.Mode == ModeVeth {
		prefix := aliasPrefix(conf.Name)
		owned, err := link.Owned(prefix)
		if err != nil {
			errs = append(errs, err)
		}
		for name, alias := range owned {
			id, ifName, _ := strings.Cut(strings.TrimPrefix(alias, prefix), "/")
			if isValid(id, ifName) {
				continue
			}
			if err := link.Delete(name); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, name)
		}
	}
	if conf.delegated() {
		if _, err := delegate(p.ctx, "GC", conf.IPAM.Type, args.StdinData, p.env); err != nil {
			errs = append(errs, err)
		}
	} else if _, err := os.Stat(filepath.Join(conf.DataDir, conf.Name)); !errors.Is(err, fs.ErrNotExist) {
		store, err := ipam.Open(conf.DataDir, conf.Name)
		if err != nil {
			errs = append(errs, err)
		} else {
			gone, err := store.GC(isValid)
			store.Close()
			if err != nil {
				errs = append(errs, err)
			}
			for _, l := range gone {
				removed = append(removed, fmt.Sprintf("%s(%s/%s)", l.IP, l.ContainerID, l.IfName))
			}
		}
	}
	p.attr("valid", fmt.Sprint(len(valid)))
	p.attr("removed", strings.Join(removed, ","))
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
