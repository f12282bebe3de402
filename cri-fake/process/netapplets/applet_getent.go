package netapplets

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// Getent is getent for the hosts database (glibc's getent.c hosts_keys; musl-utils' prints the
// same lines): for each key, an address is looked up by PTR (/etc/hosts first), a name by
// gethostbyname2 for IPv6 and then IPv4 (/etc/hosts first, then DNS over the search list), and
// each address found is printed as "%-15s %s" with the name and its aliases. Exit 2 when a key is
// not found, 1 for another database (only hosts is simulated); with no key, /etc/hosts is listed.
func Getent(p *kernel.Proc) int {
	args := p.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(p.Stderr, "Usage: getent [OPTION...] database [key ...]")
		return 1
	}
	if args[0] != "hosts" {
		fmt.Fprintf(p.Stderr, "Unknown database: %s (only hosts is simulated)\n", args[0])
		return 1
	}
	c, hosts := resolv.ForProc(p)
	if len(args) == 1 {
		for _, e := range hosts {
			printHost(p.Stdout, e.Addr, e.Names)
		}
		return 0
	}
	for _, key := range args[1:] {
		if !getentHost(p, c, hosts, key) {
			return 2
		}
	}
	return 0
}

func getentHost(p *kernel.Proc, c *resolv.Client, hosts []resolv.HostsEntry, key string) bool {
	if ip, err := netip.ParseAddr(key); err == nil {
		for _, e := range hosts {
			if e.Addr == ip {
				printHost(p.Stdout, ip, e.Names)
				return true
			}
		}
		a, err := c.Query(p.Ctx(), resolv.Question{Name: resolv.ReverseName(ip), Type: dnsmessage.TypePTR})
		if err != nil || a.Msg.RCode != dnsmessage.RCodeSuccess {
			return false
		}
		_, rrs := resolv.Records(a, dnsmessage.TypePTR)
		if len(rrs) == 0 {
			return false
		}
		printHost(p.Stdout, ip, []string{strings.TrimSuffix(resolv.RData(rrs[0]), ".")})
		return true
	}
	for _, v6 := range []bool{true, false} {
		if es := resolv.LookupHosts(hosts, key); len(es) > 0 {
			for _, e := range es {
				if e.Addr.Is6() == v6 {
					printHost(p.Stdout, e.Addr, e.Names)
					return true
				}
			}
		}
		ips, canonical, err := c.Lookup(p.Ctx(), nil, key, !v6, v6)
		if err == nil && len(ips) > 0 {
			names := []string{canonical}
			if !strings.EqualFold(canonical, strings.TrimSuffix(key, ".")) {
				names = append(names, key)
			}
			for _, ip := range ips {
				printHost(p.Stdout, ip, names)
			}
			return true
		}
	}
	return false
}

func printHost(w io.Writer, ip netip.Addr, names []string) {
	fmt.Fprintf(w, "%-15s %s\n", ip.String(), strings.Join(names, " "))
}
