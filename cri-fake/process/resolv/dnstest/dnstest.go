// Package dnstest is a small authoritative DNS server for tests of the simulated DNS clients
// (dig, nslookup, getent, curl, agnhost): a fixed zone answered over UDP and TCP on listeners
// the test opens (in a network namespace it made), with CNAME chasing inside the zone, NXDOMAIN
// for names it does not hold, and counts of the queries per transport.
package dnstest

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers from Records, keyed by fully qualified lower-case name.
type Server struct {
	mu      sync.Mutex
	records map[string][]dnsmessage.Resource
	// UDP and TCP count the queries answered over each.
	UDP, TCP atomic.Int64
	// Truncate makes UDP answers with more than this many answer records come back truncated
	// (TC set, no records), so a client must ask again over TCP (0: never).
	Truncate atomic.Int64
}

// New returns a server with no records.
func New() *Server { return &Server{records: map[string][]dnsmessage.Resource{}} }

func key(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

func (s *Server) add(name string, t dnsmessage.Type, body dnsmessage.ResourceBody) {
	n := dnsmessage.MustNewName(key(name))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[key(name)] = append(s.records[key(name)], dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: n, Type: t, Class: dnsmessage.ClassINET, TTL: 30},
		Body:   body,
	})
}

// A adds an A or AAAA record.
func (s *Server) A(name, ip string) {
	a := netip.MustParseAddr(ip)
	if a.Is4() {
		s.add(name, dnsmessage.TypeA, &dnsmessage.AResource{A: a.As4()})
		return
	}
	s.add(name, dnsmessage.TypeAAAA, &dnsmessage.AAAAResource{AAAA: a.As16()})
}

// CNAME adds a CNAME record.
func (s *Server) CNAME(name, target string) {
	s.add(name, dnsmessage.TypeCNAME, &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(key(target))})
}

// SRV adds an SRV record.
func (s *Server) SRV(name string, prio, weight, port uint16, target string) {
	s.add(name, dnsmessage.TypeSRV, &dnsmessage.SRVResource{Priority: prio, Weight: weight, Port: port, Target: dnsmessage.MustNewName(key(target))})
}

// PTR adds a PTR record.
func (s *Server) PTR(name, target string) {
	s.add(name, dnsmessage.TypePTR, &dnsmessage.PTRResource{PTR: dnsmessage.MustNewName(key(target))})
}

// Remove drops every record of name (a test changing an ExternalName, say).
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key(name))
}

// answer builds the reply to a query message.
func (s *Server) answer(req []byte, udp bool) []byte {
	var q dnsmessage.Message
	if err := q.Unpack(req); err != nil || len(q.Questions) != 1 {
		return nil
	}
	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true, RecursionDesired: q.RecursionDesired},
		Questions: q.Questions,
	}
	question := q.Questions[0]
	s.mu.Lock()
	name := key(question.Name.String())
	_, exists := s.records[name]
	for range 8 {
		next := ""
		for _, rr := range s.records[name] {
			if rr.Header.Type == question.Type {
				resp.Answers = append(resp.Answers, rr)
			} else if rr.Header.Type == dnsmessage.TypeCNAME && question.Type != dnsmessage.TypeCNAME {
				resp.Answers = append(resp.Answers, rr)
				next = key(rr.Body.(*dnsmessage.CNAMEResource).CNAME.String())
			}
		}
		if next == "" {
			break
		}
		name = next
	}
	s.mu.Unlock()
	if !exists {
		resp.RCode = dnsmessage.RCodeNameError
	}
	for _, rr := range q.Additionals {
		if rr.Header.Type == dnsmessage.TypeOPT {
			var h dnsmessage.ResourceHeader
			_ = h.SetEDNS0(1232, dnsmessage.RCodeSuccess, false)
			resp.Additionals = append(resp.Additionals, dnsmessage.Resource{Header: h, Body: &dnsmessage.OPTResource{}})
		}
	}
	if t := s.Truncate.Load(); udp && t > 0 && int64(len(resp.Answers)) > t {
		resp.Truncated = true
		resp.Answers = nil
	}
	out, err := resp.Pack()
	if err != nil {
		return nil
	}
	return out
}

// ServeUDP answers queries on pc until it is closed.
func (s *Server) ServeUDP(pc net.PacketConn) {
	buf := make([]byte, 65535)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := s.answer(buf[:n], true); out != nil {
			s.UDP.Add(1)
			_, _ = pc.WriteTo(out, addr)
		}
	}
}

// ServeTCP answers queries on ln's connections until it is closed.
func (s *Server) ServeTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for {
				var size [2]byte
				if _, err := io.ReadFull(c, size[:]); err != nil {
					return
				}
				req := make([]byte, binary.BigEndian.Uint16(size[:]))
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				out := s.answer(req, false)
				if out == nil {
					return
				}
				s.TCP.Add(1)
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err != nil {
					return
				}
			}
		}()
	}
}
