package kernel

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Link is a network device as `ip link` and `brctl show` list it.
type Link struct {
	Name string
	// Kind is the rtnetlink kind ("bridge", "dummy", "veth" ...); empty for
	// a device of the namespace itself (lo, eth0).
	Kind string
}

// netDevices are the devices a container's processes added (ip link add,
// brctl addbr). They are the simulation's own: nothing is created in a
// kernel namespace, so a privileged container can never add a device to the
// node. Its zero value is an empty table, so a container that adds none
// costs nothing.
type netDevices struct {
	mu    sync.Mutex
	added []Link
}

// maxLinks bounds the devices one container may add, so a loop of `ip link
// add` cannot grow cri-fake's memory without bound (the kernel has no such
// small limit; ENOBUFS is what rtnetlink answers when it runs out).
const maxLinks = 1024

// maxLinkName is IFNAMSIZ-1: a longer device name is EINVAL ("ip: "name" not a valid ifname").
const maxLinkName = 15

// validLinkName is dev_valid_name(): 1 to 15 bytes, not "." or "..", no '/',
// ':' or white space.
func validLinkName(name string) bool {
	if name == "" || len(name) > maxLinkName || name == "." || name == ".." {
		return false
	}
	return !strings.ContainsAny(name, "/: \t\n\r\v\f")
}

// LinkAdd adds a network device (RTM_NEWLINK, the SIOCBRADDBR ioctl of
// brctl): it needs CAP_NET_ADMIN. A name in use is EEXIST, an invalid one
// EINVAL.
func (p *Proc) LinkAdd(name, kind string) error {
	if err := p.need(CapNetAdmin); err != nil {
		return err
	}
	if !validLinkName(name) {
		return syscall.EINVAL
	}
	for _, l := range p.baseLinks() {
		if l.Name == name {
			return syscall.EEXIST
		}
	}
	d := &p.c.netdev
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.ContainsFunc(d.added, func(l Link) bool { return l.Name == name }) {
		return syscall.EEXIST
	}
	if len(d.added) >= maxLinks {
		return syscall.ENOBUFS
	}
	d.added = append(d.added, Link{Name: name, Kind: kind})
	return nil
}

// LinkDel removes a device this container added (RTM_DELLINK, SIOCBRDELBR):
// CAP_NET_ADMIN; ENODEV when there is none of that name, EOPNOTSUPP for
// the namespace's own devices (lo cannot be deleted; eth0 is the CNI
// plugin's, which the simulation leaves alone).
func (p *Proc) LinkDel(name string) error {
	if err := p.need(CapNetAdmin); err != nil {
		return err
	}
	d := &p.c.netdev
	d.mu.Lock()
	i := slices.IndexFunc(d.added, func(l Link) bool { return l.Name == name })
	if i >= 0 {
		d.added = slices.Delete(d.added, i, i+1)
	}
	d.mu.Unlock()
	if i >= 0 {
		return nil
	}
	for _, l := range p.baseLinks() {
		if l.Name == name {
			return syscall.EOPNOTSUPP
		}
	}
	return syscall.ENODEV
}

// Links lists the network namespace's devices (reading needs no
// capability): those of its kernel namespace (from /proc/net/dev), then the
// ones the container added.
func (p *Proc) Links() []Link {
	out := p.baseLinks()
	d := &p.c.netdev
	d.mu.Lock()
	out = append(out, d.added...)
	d.mu.Unlock()
	return out
}

// baseLinks are the devices of the container's network namespace: read from
// its /proc/net/dev when it is a kernel namespace, just the loopback
// otherwise (the runtime's Spec.Listen registry has no devices).
func (p *Proc) baseLinks() []Link {
	if !p.KernelNetwork() {
		return []Link{{Name: "lo"}}
	}
	data, err := p.c.readProcNet("dev")
	if err != nil {
		return []Link{{Name: "lo"}}
	}
	var out []Link
	// /proc/net/dev: two header lines, then "  name: counters..." per device.
	for i, line := range bytes.Split(data, []byte("\n")) {
		name, _, ok := bytes.Cut(line, []byte(":"))
		if i < 2 || !ok {
			continue
		}
		out = append(out, Link{Name: string(bytes.TrimSpace(name))})
	}
	return out
}
