package kernel

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// ICMPSocket is a raw ICMP socket (socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)),
// the one busybox ping opens. Echo requests to the container's own addresses
// (the loopback network and the pod IPs) are answered by the simulation, as
// the kernel answers them locally; others go out through a real raw socket
// in the container's network namespace (the node's for a host-network pod).
type ICMPSocket struct {
	p    *Proc
	dst  net.IP
	conn *icmp.PacketConn // nil when the simulation answers
	id   int
}

// ErrNoReply is an echo request that got no reply before its timeout.
var ErrNoReply = errors.New("no reply")

// OpenICMP opens a raw ICMP socket to send echo requests to dst: it needs
// CAP_NET_RAW (EPERM without it, what ping reports as "permission denied
// (are you root?)"). Without a kernel namespace (Spec.Listen) only the
// container's own addresses are reachable: others are ENETUNREACH.
func (p *Proc) OpenICMP(dst net.IP) (*ICMPSocket, error) {
	if err := p.need(CapNetRaw); err != nil {
		return nil, err
	}
	s := &ICMPSocket{p: p, dst: dst, id: p.Pid() & 0xffff}
	if p.ownAddress(dst) {
		return s, nil
	}
	if dst.To4() == nil {
		// IPv6 beyond ::1 and the pod's own addresses is not simulated.
		return nil, syscall.ENETUNREACH
	}
	open := func(ns.NetNS) error {
		var err error
		s.conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}
	var err error
	switch {
	case !p.KernelNetwork():
		return nil, syscall.ENETUNREACH
	case p.c.spec.NetNS != "":
		err = ns.WithNetNSPath(p.c.spec.NetNS, open)
	default:
		err = open(nil)
	}
	if err != nil {
		return nil, err
	}
	if err := s.conn.IPv4PacketConn().SetControlMessage(ipv4.FlagTTL, true); err != nil {
		s.conn.Close()
		return nil, err
	}
	return s, nil
}

// ownAddress reports whether ip is one the container's namespace answers
// itself: 127.0.0.0/8, ::1, or a pod IP.
func (p *Proc) ownAddress(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	return slices.ContainsFunc(p.c.fs.Config().IPs, func(s string) bool { return net.ParseIP(s).Equal(ip) })
}

// Echo sends echo request seq with size bytes of data and waits at most
// timeout (or until ctx ends) for its reply; it returns the reply's TTL and
// the round trip.
func (s *ICMPSocket) Echo(ctx context.Context, seq, size int, timeout time.Duration) (ttl int, rtt time.Duration, err error) {
	start := time.Now()
	if s.conn == nil {
		// The loopback answers at once, with the default TTL (net.ipv4.ip_default_ttl).
		return 64, time.Since(start), ctx.Err()
	}
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: s.id, Seq: seq, Data: make([]byte, size)}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return 0, 0, err
	}
	if _, err := s.conn.WriteTo(b, &net.IPAddr{IP: s.dst}); err != nil {
		return 0, 0, err
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetReadDeadline(time.Now()) })
	defer stop()
	pc := s.conn.IPv4PacketConn()
	if err := pc.SetReadDeadline(deadline); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 1500)
	for {
		n, cm, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx.Err() != nil {
					return 0, 0, ctx.Err()
				}
				return 0, 0, ErrNoReply
			}
			return 0, 0, err
		}
		reply, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || reply.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		e, ok := reply.Body.(*icmp.Echo)
		if !ok || e.ID != s.id || e.Seq != seq || !addrIs(from, s.dst) {
			continue
		}
		if cm != nil {
			ttl = cm.TTL
		}
		return ttl, time.Since(start), nil
	}
}

func addrIs(a net.Addr, ip net.IP) bool {
	ia, ok := a.(*net.IPAddr)
	return ok && ia.IP.Equal(ip)
}

// Close closes the socket.
func (s *ICMPSocket) Close() error {
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}
