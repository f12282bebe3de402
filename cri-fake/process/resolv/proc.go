package resolv

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// maxFileBytes bounds what is read of resolv.conf and hosts (a container may make either
// anything): glibc and musl read them line by line; 1 MiB is far past any real one.
const maxFileBytes = 1 << 20

func readSmall(p *kernel.Proc, name string) []byte {
	rc, err := p.FS().Open(name)
	if err != nil {
		return nil
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, maxFileBytes))
	return data
}

// ForProc is the resolver of p's container, read now (a program reads resolv.conf and hosts
// when it starts resolving): its /etc/resolv.conf, its /etc/hosts, and queries sent from its
// network namespace.
//
// Queries go out only from a pod's own network namespace. In the node's namespace (a host-network
// container, or a test's container without Spec.NetNS) the node's resolv.conf names servers that
// may be outside the machine, and the simulation sends nothing there: lookups use /etc/hosts, and
// a DNS query fails as an unreachable network.
func ForProc(p *kernel.Proc) (*Client, []HostsEntry) {
	dial := p.Dial
	if !p.PodNetwork() {
		dial = func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "udp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
		}
	}
	c := &Client{Dial: dial, Conf: ParseConf(readSmall(p, "/etc/resolv.conf"))}
	return c, ParseHosts(readSmall(p, "/etc/hosts"))
}

// DialContext connects from p's network namespace to addr (host:port), resolving a host name
// through the container's resolver (hosts, then DNS; IPv4 first) and trying each address in
// turn, as Go's net.Dialer does: what a Go program in the image (agnhost) or curl does.
func DialContext(p *kernel.Proc) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := LookupHost(ctx, p, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		var first error
		for _, ip := range ips {
			c, err := p.Dial(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, first
	}
}

// LookupHost resolves host in p's container: an IP literal is itself, "localhost" and other
// names go through hosts, then DNS (A, then AAAA).
func LookupHost(ctx context.Context, p *kernel.Proc, host string) ([]netip.Addr, error) {
	host = strings.Trim(host, "[]")
	if host == "" {
		// Go's Dial: an empty host is the local system.
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	c, hosts := ForProc(p)
	ips, _, err := c.Lookup(ctx, hosts, host, true, true)
	return ips, err
}
