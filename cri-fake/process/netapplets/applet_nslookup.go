package netapplets

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// Nslookup is BIND 9.18's nslookup in its non-interactive form, `nslookup [-type=T] [-port=N]
// [-timeout=S] [-retry=N] [-vc] NAME [SERVER]`: it tries the resolv.conf search list (ndots) as
// nslookup does, asks for A then AAAA (or the -type given), and prints the answer as it does:
//
//	Server:		10.96.0.10
//	Address:	10.96.0.10#53
//
//	Name:	kubernetes.default.svc.cluster.local
//	Address: 10.96.0.1
//
// with "Non-authoritative answer:" above a non-authoritative one, "canonical name = " lines for
// CNAMEs, "** server can't find NAME: NXDOMAIN" and exit 1 when the name does not exist, and
// ";; connection timed out; no servers could be reached" (exit 1) when no server answers.
// Interactive mode (no name) is not simulated.
func Nslookup(p *kernel.Proc) int {
	var name, server string
	types := []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA}
	port, tries, tcp := 53, 0, false
	timeout := time.Duration(0)
	for _, a := range p.Args[1:] {
		if opt, ok := strings.CutPrefix(a, "-"); ok && a != "-" {
			k, v, _ := strings.Cut(opt, "=")
			switch strings.ToLower(k) {
			case "type", "querytype", "query", "q", "ty":
				t, ok := resolv.ParseType(v)
				if !ok {
					fmt.Fprintf(p.Stdout, "unknown query type: %s\n", v)
					continue
				}
				types = []dnsmessage.Type{t}
			case "port":
				n, err := strconv.Atoi(v)
				if err == nil && n > 0 && n < 65536 {
					port = n
				}
			case "timeout":
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					timeout = time.Duration(n) * time.Second
				}
			case "retry":
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					tries = n
				}
			case "vc":
				tcp = true
			case "novc", "debug", "nodebug", "search", "recurse", "d2", "nod2":
			default:
				fmt.Fprintf(p.Stdout, "*** Invalid option: %s\n", opt)
			}
			continue
		}
		switch {
		case name == "":
			name = a
		case server == "":
			server = a
		}
	}
	if name == "" || name == "-" {
		p.Errorf("interactive mode is not simulated: give the name to look up")
		return 1
	}
	c, _ := resolv.ForProc(p)
	if timeout > 0 {
		c.Conf.Timeout = timeout
	}
	servers := c.Conf.Nameservers
	if server != "" {
		ip, err := netip.ParseAddr(server)
		if err != nil {
			fmt.Fprintf(p.Stderr, ";; couldn't get address for '%s': not found\n", server)
			return 1
		}
		servers = []string{ip.String()}
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		// nslookup ADDRESS asks for the PTR record.
		name, types = resolv.ReverseName(ip), []dnsmessage.Type{dnsmessage.TypePTR}
	}
	candidates := c.Conf.Candidates(name)
	out := p.Stdout
	header := func(a resolv.Answer) {
		fmt.Fprintf(out, "Server:\t\t%s\nAddress:\t%s#%d\n\n", a.Server, a.Server, a.Port)
	}
	for i, cand := range candidates {
		var answers []resolv.Answer
		found, nx := false, false
		for _, t := range types {
			a, err := c.Query(p.Ctx(), resolv.Question{Name: cand, Type: t, TCP: tcp, Servers: servers, Port: port, Tries: tries})
			if err != nil {
				if code, killed := kernel.ExitCause(p.Ctx()); killed {
					return code
				}
				fmt.Fprintln(out, ";; connection timed out; no servers could be reached")
				fmt.Fprintln(out)
				return 1
			}
			if a.Msg.RCode == dnsmessage.RCodeNameError {
				nx = true
				answers = append(answers, a)
				break
			}
			if a.Msg.RCode != dnsmessage.RCodeSuccess {
				if i == len(candidates)-1 {
					header(a)
					fmt.Fprintf(out, "** server can't find %s: %s\n\n", strings.TrimSuffix(cand, "."), resolv.RcodeString(a.Msg.RCode))
					return 1
				}
				break
			}
			if len(a.Msg.Answers) > 0 {
				found = true
			}
			answers = append(answers, a)
		}
		if !found && i < len(candidates)-1 {
			continue
		}
		if len(answers) == 0 {
			return 1
		}
		header(answers[0])
		if nx || !found {
			if nx {
				fmt.Fprintf(out, "** server can't find %s: NXDOMAIN\n\n", strings.TrimSuffix(cand, "."))
			} else {
				fmt.Fprintf(out, "*** Can't find %s: No answer\n\n", strings.TrimSuffix(cand, "."))
			}
			return 1
		}
		if !answers[0].Msg.Authoritative {
			fmt.Fprintln(out, "Non-authoritative answer:")
		}
		cnames := map[string]bool{}
		for _, a := range answers {
			for _, rr := range a.Msg.Answers {
				owner := strings.TrimSuffix(rr.Header.Name.String(), ".")
				switch b := rr.Body.(type) {
				case *dnsmessage.CNAMEResource:
					if !cnames[owner] {
						cnames[owner] = true
						fmt.Fprintf(out, "%s\tcanonical name = %s\n", owner, b.CNAME.String())
					}
				case *dnsmessage.AResource, *dnsmessage.AAAAResource:
					fmt.Fprintf(out, "Name:\t%s\nAddress: %s\n", owner, resolv.RData(rr))
				case *dnsmessage.PTRResource:
					fmt.Fprintf(out, "%s\tname = %s\n", owner, b.PTR.String())
				case *dnsmessage.SRVResource:
					fmt.Fprintf(out, "%s\tservice = %s\n", owner, resolv.RData(rr))
				case *dnsmessage.MXResource:
					fmt.Fprintf(out, "%s\tmail exchanger = %s\n", owner, resolv.RData(rr))
				case *dnsmessage.NSResource:
					fmt.Fprintf(out, "%s\tnameserver = %s\n", owner, resolv.RData(rr))
				case *dnsmessage.TXTResource:
					fmt.Fprintf(out, "%s\ttext = %s\n", owner, resolv.RData(rr))
				default:
					fmt.Fprintf(out, "%s\trdata_%d = %s\n", owner, rr.Header.Type, resolv.RData(rr))
				}
			}
		}
		fmt.Fprintln(out)
		return 0
	}
	return 1
}
