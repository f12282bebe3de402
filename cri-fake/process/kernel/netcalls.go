package kernel

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ListenPacket binds a UDP port in the container's network namespace, as Listen binds a TCP one
// (the same capability rule for ports below net.ipv4.ip_unprivileged_port_start). Without a
// kernel namespace (Spec.Listen) the socket is bound on an ephemeral loopback port of the
// runtime's own namespace: the program runs, and nothing outside the runtime reaches it, as a
// pod without a reachable IP.
func (p *Proc) ListenPacket(port int) (net.PacketConn, error) {
	if err := p.seccompSocket("bind"); err != nil {
		return nil, err
	}
	addr := ":" + strconv.Itoa(port)
	if err := p.bindAllowed(port); err != nil {
		return nil, &net.OpError{Op: "listen", Net: "udp", Err: os.NewSyscallError("bind", err)}
	}
	switch {
	case p.c.spec.Listen != nil:
		return net.ListenPacket("udp", "127.0.0.1:0")
	case p.c.spec.NetNS != "":
		var pc net.PacketConn
		err := ns.WithNetNSPath(p.c.spec.NetNS, func(ns.NetNS) error {
			var err error
			pc, err = net.ListenPacket("udp", addr)
			return err
		})
		return pc, err
	}
	return net.ListenPacket("udp", addr)
}

// DialFrom is Dial with a source address (curl --interface, nc -s): laddr is an IP the
// namespace holds (or empty for the kernel's choice).
func (p *Proc) DialFrom(ctx context.Context, network, laddr, addr string) (net.Conn, error) {
	if laddr == "" {
		return p.Dial(ctx, network, addr)
	}
	if err := p.seccompSocket("bind", "connect"); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	d := net.Dialer{}
	ip := net.ParseIP(laddr)
	if ip == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}
	}
	switch network {
	case "udp", "udp4", "udp6":
		d.LocalAddr = &net.UDPAddr{IP: ip}
	default:
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	switch {
	case p.c.spec.Listen != nil:
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	case p.c.spec.NetNS != "":
		var c net.Conn
		err := ns.WithNetNSPath(p.c.spec.NetNS, func(ns.NetNS) error {
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return d.DialContext(ctx, network, addr)
}

// Statfs is statfs(2)'s f_type for path: what file system it is on (vfs.FS.Statfs).
func (p *Proc) Statfs(path string) (int64, error) { return p.c.fs.Statfs(p.Abs(path)) }

// PodNetwork reports whether the container has a network namespace of its own (Spec.NetNS),
// rather than the node's (a host-network pod) or none (Spec.Listen).
func (p *Proc) PodNetwork() bool { return p.c.spec.NetNS != "" }
