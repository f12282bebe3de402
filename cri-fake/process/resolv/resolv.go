// Package resolv is the DNS stub resolver of the simulated programs (libc's resolv, Go's
// net.Resolver, BIND's dig library in one): it reads the container's /etc/resolv.conf and
// /etc/hosts, and sends real DNS queries, over UDP or TCP, to the resolv.conf nameservers from the
// container's network namespace (through the dial function its caller gives, the kernel's
// Proc.Dial). Nothing here asks the host's resolver.
package resolv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Conf is what /etc/resolv.conf says (resolv.conf(5)).
type Conf struct {
	Nameservers []string // IP addresses
	Search      []string
	Ndots       int
	Timeout     time.Duration // per query, per server
	Attempts    int           // rounds over the servers
}

// DefaultConf is resolv.conf(5)'s defaults: ndots 1, timeout 5 s, 2 attempts; no server means
// the local one (127.0.0.1), as glibc and musl take it.
func DefaultConf() Conf { return Conf{Ndots: 1, Timeout: 5 * time.Second, Attempts: 2} }

// maxSearch and maxServers bound what a hostile resolv.conf can make the resolver do
// (glibc's MAXDNSRCH is 6 and MAXNS 3; musl's are the same).
const (
	maxSearch  = 6
	maxServers = 3
)

// ParseConf reads resolv.conf content.
func ParseConf(data []byte) Conf {
	c := DefaultConf()
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 && len(c.Nameservers) < maxServers {
				if ip, err := netip.ParseAddr(f[1]); err == nil {
					c.Nameservers = append(c.Nameservers, ip.String())
				}
			}
		case "search", "domain":
			// The last search or domain line wins.
			c.Search = nil
			for _, d := range f[1:] {
				if len(c.Search) == maxSearch {
					break
				}
				c.Search = append(c.Search, strings.TrimSuffix(d, "."))
			}
		case "options":
			for _, o := range f[1:] {
				k, v, _ := strings.Cut(o, ":")
				n, err := strconv.Atoi(v)
				switch {
				case k == "ndots" && err == nil && n >= 0:
					c.Ndots = min(n, 15)
				case k == "timeout" && err == nil && n >= 1:
					c.Timeout = time.Duration(min(n, 30)) * time.Second
				case k == "attempts" && err == nil && n >= 1:
					c.Attempts = min(n, 5)
				}
			}
		}
	}
	if len(c.Nameservers) == 0 {
		c.Nameservers = []string{"127.0.0.1"}
	}
	return c
}

// Candidates are the names a lookup of name tries, in order: name alone when it ends in a dot;
// otherwise the search list applied first when name has fewer than ndots dots, last when it has
// as many (glibc's and Go's order).
func (c Conf) Candidates(name string) []string {
	if strings.HasSuffix(name, ".") {
		return []string{name}
	}
	var out []string
	abs := name + "."
	if strings.Count(name, ".") >= c.Ndots {
		out = append(out, abs)
	}
	for _, d := range c.Search {
		if d == "" {
			continue
		}
		out = append(out, name+"."+d+".")
	}
	if strings.Count(name, ".") < c.Ndots {
		out = append(out, abs)
	}
	return out
}

// HostsEntry is one line of /etc/hosts.
type HostsEntry struct {
	Addr  netip.Addr
	Names []string // the canonical name first, then aliases
}

// ParseHosts reads /etc/hosts content.
func ParseHosts(data []byte) []HostsEntry {
	var out []HostsEntry
	for line := range strings.SplitSeq(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		ip, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		out = append(out, HostsEntry{Addr: ip.WithZone(""), Names: f[1:]})
	}
	return out
}

// LookupHosts returns the entries of hosts naming name (case-insensitively).
func LookupHosts(hosts []HostsEntry, name string) []HostsEntry {
	name = strings.TrimSuffix(name, ".")
	var out []HostsEntry
	for _, e := range hosts {
		for _, n := range e.Names {
			if strings.EqualFold(n, name) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// Dialer connects from the container's network namespace (kernel.Proc.Dial).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Client sends DNS queries.
type Client struct {
	Dial Dialer
	Conf Conf
}

// Error is a lookup's failure, worded as Go's net.DNSError is (programs print it as their
// runtime would).
type Error struct {
	Name string
	// Server that answered (or was tried last).
	Server    string
	NotFound  bool // NXDOMAIN, or no records of the type
	Timeout   bool // no server answered
	ServFail  bool // SERVFAIL, REFUSED or an unusable answer
	Rcode     dnsmessage.RCode
	Err       string
	Responded bool
}

func (e *Error) Error() string {
	msg := e.Err
	switch {
	case msg != "":
	case e.NotFound:
		msg = "no such host"
	case e.Timeout:
		msg = "i/o timeout"
	default:
		msg = "server misbehaving"
	}
	s := "lookup " + strings.TrimSuffix(e.Name, ".")
	if e.Server != "" {
		s += " on " + e.Server
	}
	return s + ": " + msg
}

// Exchange sends q (its ID set here) to server (an IP address; port 53) over UDP, or TCP when
// tcp is set or the UDP answer was truncated, and returns the answer, its size on the wire and
// how long it took, and whether it came over TCP. A UDP reply whose ID or question does not match
// is ignored, as resolvers do.
func (c *Client) Exchange(ctx context.Context, server string, port int, q dnsmessage.Message, tcp bool) (Answer, error) {
	if port == 0 {
		port = 53
	}
	addr := net.JoinHostPort(server, strconv.Itoa(port))
	timeout := c.Conf.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	q.ID = uint16(rand.Uint32())
	q.Header.Response = false
	a := Answer{Server: server, Port: port}
	if len(q.Questions) > 0 {
		a.Name = q.Questions[0].Name.String()
	}
	start := time.Now()
	if !tcp {
		ans, size, err := c.exchangeUDP(ctx, addr, q, timeout)
		if err != nil || !ans.Header.Truncated {
			a.Msg, a.Size, a.RTT = ans, size, time.Since(start)
			return a, err
		}
	}
	ans, size, err := c.exchangeTCP(ctx, addr, q, timeout)
	a.Msg, a.Size, a.RTT, a.TCP = ans, size, time.Since(start), true
	return a, err
}

// maxUDPSize is the EDNS payload size announced (BIND's and the DNS flag day 2020's 1232) and
// read.
const maxUDPSize = 1232

func (c *Client) exchangeUDP(ctx context.Context, addr string, q dnsmessage.Message, timeout time.Duration) (*dnsmessage.Message, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := c.Dial(ctx, "udp", addr)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	msg, err := q.Pack()
	if err != nil {
		return nil, 0, err
	}
	if _, err := conn.Write(msg); err != nil {
		return nil, 0, err
	}
	buf := make([]byte, maxUDPSize+512)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, errTimeout
			}
			return nil, 0, err
		}
		var ans dnsmessage.Message
		if ans.Unpack(buf[:n]) != nil || !matches(q, ans) {
			continue // not ours, or garbage: keep waiting for the real answer
		}
		return &ans, n, nil
	}
}

func (c *Client) exchangeTCP(ctx context.Context, addr string, q dnsmessage.Message, timeout time.Duration) (*dnsmessage.Message, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := c.Dial(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, errTimeout
		}
		return nil, 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	msg, err := q.Pack()
	if err != nil {
		return nil, 0, err
	}
	framed := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	if _, err := conn.Write(append(framed, msg...)); err != nil {
		return nil, 0, err
	}
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		if ctx.Err() != nil {
			return nil, 0, errTimeout
		}
		return nil, 0, err
	}
	// At most 64 KiB, the largest a DNS message over TCP can be.
	buf := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		if ctx.Err() != nil {
			return nil, 0, errTimeout
		}
		return nil, 0, err
	}
	var ans dnsmessage.Message
	if err := ans.Unpack(buf); err != nil {
		return nil, 0, fmt.Errorf("malformed answer: %w", err)
	}
	if !matches(q, ans) {
		return nil, 0, errors.New("answer does not match the query")
	}
	return &ans, len(buf), nil
}

// errTimeout is a query that got no answer in time.
var errTimeout = errors.New("i/o timeout")

// IsTimeout reports whether err is a query that got no answer in time.
func IsTimeout(err error) bool { return errors.Is(err, errTimeout) }

func matches(q, a dnsmessage.Message) bool {
	if !a.Header.Response || a.ID != q.ID || len(a.Questions) != len(q.Questions) {
		return false
	}
	for i := range q.Questions {
		if !strings.EqualFold(q.Questions[i].Name.String(), a.Questions[i].Name.String()) ||
			q.Questions[i].Type != a.Questions[i].Type || q.Questions[i].Class != a.Questions[i].Class {
			return false
		}
	}
	return true
}

// NewQuery is a recursive query for name (fully qualified, with its final dot) of type t, with
// EDNS0 announcing maxUDPSize when edns is set.
func NewQuery(name string, t dnsmessage.Type, edns bool) (dnsmessage.Message, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return dnsmessage.Message{}, err
	}
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: n, Type: t, Class: dnsmessage.ClassINET}},
	}
	if edns {
		var h dnsmessage.ResourceHeader
		if err := h.SetEDNS0(maxUDPSize, dnsmessage.RCodeSuccess, false); err != nil {
			return q, err
		}
		q.Additionals = append(q.Additionals, dnsmessage.Resource{Header: h, Body: &dnsmessage.OPTResource{}})
	}
	return q, nil
}

// Answer is a query's outcome: the message and the server that sent it.
type Answer struct {
	Msg    *dnsmessage.Message
	Server string
	Port   int
	Name   string // the name asked
	RTT    time.Duration
	TCP    bool
	Size   int // bytes on the wire
}

// Question is what a lookup asks and how.
type Question struct {
	Name string // fully qualified, with its final dot
	Type dnsmessage.Type
	TCP  bool // over TCP from the start (else UDP, then TCP when truncated)
	EDNS bool
	// Servers to ask instead of the resolv.conf ones, on Port (0: 53).
	Servers []string
	Port    int
	// Tries is how many rounds over the servers (0: the resolv.conf attempts).
	Tries int
	// Failed hears of each query that got no answer (dig prints them).
	Failed func(server string, port int, err error)
}

// Query asks the servers for q.Name: each server in turn, Tries rounds, until one answers (any
// rcode but SERVFAIL and REFUSED, which move on to the next server, as glibc does; the last
// such answer is returned when no server does better).
func (c *Client) Query(ctx context.Context, q Question) (Answer, error) {
	msg, err := NewQuery(q.Name, q.Type, q.EDNS)
	if err != nil {
		return Answer{}, &Error{Name: q.Name, Err: "no such host"}
	}
	servers := q.Servers
	if len(servers) == 0 {
		servers = c.Conf.Nameservers
	}
	port := q.Port
	if port == 0 {
		port = 53
	}
	tries := q.Tries
	if tries <= 0 {
		tries = max(c.Conf.Attempts, 1)
	}
	var last error
	var lastServer string
	var failed *Answer
	for range tries {
		for _, s := range servers {
			lastServer = s
			a, err := c.Exchange(ctx, s, port, msg, q.TCP)
			if err != nil {
				last = err
				if q.Failed != nil {
					q.Failed(s, port, err)
				}
				if ctx.Err() != nil {
					return Answer{}, &Error{Name: q.Name, Server: net.JoinHostPort(s, strconv.Itoa(port)), Timeout: true}
				}
				continue
			}
			if a.Msg.RCode == dnsmessage.RCodeServerFailure || a.Msg.RCode == dnsmessage.RCodeRefused {
				failed = &a
				continue
			}
			return a, nil
		}
	}
	if failed != nil {
		return *failed, nil
	}
	e := &Error{Name: q.Name, Server: net.JoinHostPort(lastServer, strconv.Itoa(port))}
	if IsTimeout(last) {
		e.Timeout = true
	} else if last != nil {
		e.Err = last.Error()
	}
	return Answer{}, e
}

// Records are the answer records of a, in order, with the CNAME chain from the asked name
// followed: the canonical name reached and the records of type t at it.
func Records(a Answer, t dnsmessage.Type) (canonical string, rrs []dnsmessage.Resource) {
	name := a.Name
	for range 16 { // a CNAME chain longer than this is a loop
		next := ""
		for _, rr := range a.Msg.Answers {
			if !strings.EqualFold(rr.Header.Name.String(), name) {
				continue
			}
			if rr.Header.Type == t {
				rrs = append(rrs, rr)
			} else if c, ok := rr.Body.(*dnsmessage.CNAMEResource); ok && t != dnsmessage.TypeCNAME {
				next = c.CNAME.String()
			}
		}
		if len(rrs) > 0 || next == "" {
			return name, rrs
		}
		name = next
	}
	return name, nil
}

// Lookup resolves name to addresses of the families asked, as getaddrinfo does: /etc/hosts
// first, then DNS over the search list (A, then AAAA). It returns the canonical name.
func (c *Client) Lookup(ctx context.Context, hosts []HostsEntry, name string, v4, v6 bool) ([]netip.Addr, string, error) {
	if ip, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{ip}, name, nil
	}
	if es := LookupHosts(hosts, name); len(es) > 0 {
		var out []netip.Addr
		for _, e := range es {
			if e.Addr.Is4() && v4 || e.Addr.Is6() && v6 {
				out = append(out, e.Addr)
			}
		}
		if len(out) > 0 {
			return out, es[0].Names[0], nil
		}
	}
	if name == "" || len(name) > 253 {
		return nil, "", &Error{Name: name, NotFound: true}
	}
	var lastErr error = &Error{Name: name, NotFound: true}
	for _, cand := range c.Conf.Candidates(name) {
		var out []netip.Addr
		canonical := cand
		for _, t := range families(v4, v6) {
			a, err := c.Query(ctx, Question{Name: cand, Type: t})
			if err != nil {
				return nil, "", err
			}
			if a.Msg.RCode != dnsmessage.RCodeSuccess {
				if a.Msg.RCode != dnsmessage.RCodeNameError {
					lastErr = &Error{Name: name, Server: net.JoinHostPort(a.Server, "53"), ServFail: true, Responded: true}
				}
				continue
			}
			cn, rrs := Records(a, t)
			canonical = cn
			for _, rr := range rrs {
				switch b := rr.Body.(type) {
				case *dnsmessage.AResource:
					out = append(out, netip.AddrFrom4(b.A))
				case *dnsmessage.AAAAResource:
					out = append(out, netip.AddrFrom16(b.AAAA))
				}
			}
		}
		if len(out) > 0 {
			return out, strings.TrimSuffix(canonical, "."), nil
		}
	}
	return nil, "", lastErr
}

func families(v4, v6 bool) []dnsmessage.Type {
	var out []dnsmessage.Type
	if v4 {
		out = append(out, dnsmessage.TypeA)
	}
	if v6 {
		out = append(out, dnsmessage.TypeAAAA)
	}
	return out
}

// ReverseName is the PTR name of ip (in-addr.arpa. or ip6.arpa.).
func ReverseName(ip netip.Addr) string {
	var b strings.Builder
	if ip.Is4() || ip.Is4In6() {
		a := ip.Unmap().As4()
		for i := 3; i >= 0; i-- {
			b.WriteString(strconv.Itoa(int(a[i])))
			b.WriteByte('.')
		}
		b.WriteString("in-addr.arpa.")
		return b.String()
	}
	a := ip.As16()
	const hex = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b.WriteByte(hex[a[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hex[a[i]>>4])
		b.WriteByte('.')
	}
	b.WriteString("ip6.arpa.")
	return b.String()
}
