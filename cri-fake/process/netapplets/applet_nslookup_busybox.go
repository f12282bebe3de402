package netapplets

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// BusyboxNslookup is busybox 1.36's nslookup (networking/nslookup.c with FEATURE_NSLOOKUP_BIG, the
// musl-compatible one from OpenWrt): `nslookup [-type=T] [-port=N] [-retry=N] [-timeout=S] [-debug]
// HOST [SERVER]`. It is not BIND's (Nslookup): it asks for A and AAAA at once, and applies the
// resolv.conf search list only to a name without a dot, one query per domain, so in a pod
//
//	nslookup kubernetes             # kubernetes.default.svc.cluster.local, and NXDOMAIN for the others
//	nslookup kubernetes.default     # ** server can't find kubernetes.default: NXDOMAIN (exit 1)
//
// the second being the behaviour Kubernetes' DNS debugging page warns about for busybox images. Each
// reply is printed as it comes, followed by an empty line: the records (`Name:\tNAME` and
// `Address: IP`; `NAME\tname = TARGET` for PTR, `canonical name =`, `service =`, `mail exchanger =`,
// `text =`, `nameserver =`, SOA's lines), "Non-authoritative answer:" above a non-authoritative one,
// "** server can't find NAME: RCODE" (and exit 1) for an error. The header names the server as
// given and its address with the port after a colon (`Address:\t10.96.0.10:53`). A query no server
// answered within the timeout prints "*** Can't find NAME: No answer"; no answer at all, ";;
// connection timed out; no servers could be reached" (exit 1).
func BusyboxNslookup(p *kernel.Proc) int {
	usage := func() int {
		fmt.Fprintln(p.Stderr, "BusyBox v1.36.1 (plugsim simulation) multi-call binary.\n\nUsage: nslookup [-type=QUERY_TYPE] [-debug] HOST [DNS_SERVER]\n\nQuery DNS about HOST\n\nQUERY_TYPE: soa,ns,a,aaaa,cname,mx,txt,ptr,srv,any")
		return 1
	}
	qtypes := []struct {
		name string
		t    dnsmessage.Type
	}{{"SOA", dnsmessage.TypeSOA}, {"NS", dnsmessage.TypeNS}, {"A", dnsmessage.TypeA}, {"AAAA", dnsmessage.TypeAAAA},
		{"CNAME", dnsmessage.TypeCNAME}, {"MX", dnsmessage.TypeMX}, {"TXT", dnsmessage.TypeTXT}, {"SRV", dnsmessage.TypeSRV},
		{"PTR", dnsmessage.TypePTR}, {"ANY", dnsmessage.TypeALL}}
	chosen := make([]bool, len(qtypes))
	port, retry, timeout := 53, 2, 5
	args := p.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		k, v, _ := strings.Cut(args[0][1:], "=")
		args = args[1:]
		// index_in_substrings: the option's full name (busybox takes no abbreviation here but "t").
		switch k {
		case "type", "querytype":
			i := 0
			for ; i < len(qtypes) && !strings.EqualFold(qtypes[i].name, v); i++ {
			}
			if i == len(qtypes) {
				p.Errorf("invalid query type \"%s\"", v)
				return 1
			}
			chosen[i] = true
		case "port", "retry", "t", "timeout":
			hi := map[string]int{"port": 0xffff, "retry": 1<<31 - 1}[k]
			if hi == 0 {
				hi = (1<<31 - 1) / 1000
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > hi {
				p.Errorf("invalid number '%s'", v)
				return 1
			}
			switch k {
			case "port":
				port = n
			case "retry":
				retry = n
			default:
				timeout = n
			}
		case "debug":
		default:
			return usage()
		}
	}
	if len(args) == 0 || len(args) > 2 {
		return usage()
	}
	name := args[0]
	c, _ := resolv.ForProc(p)
	servers := c.Conf.Nameservers
	if len(args) == 2 {
		if _, err := netip.ParseAddr(args[1]); err != nil {
			p.Errorf("bad address '%s'", args[1]) // xhost2sockaddr: no lookup of a server's name here
			return 1
		}
		servers = []string{args[1]}
	}
	if len(servers) == 0 {
		servers = []string{"127.0.0.1"}
	}
	// The queries: a PTR for an address, else each chosen type (A and AAAA by default), each over the
	// search list when the name has no dot.
	var queries []resolv.Question
	add := func(t dnsmessage.Type) {
		if t == dnsmessage.TypePTR || len(c.Conf.Search) == 0 || strings.Contains(name, ".") {
			queries = append(queries, resolv.Question{Name: name, Type: t})
			return
		}
		for _, d := range c.Conf.Search {
			queries = append(queries, resolv.Question{Name: name + "." + d, Type: t})
		}
	}
	picked := false
	for i, q := range qtypes {
		if chosen[i] {
			add(q.t)
			picked = true
		}
	}
	if !picked {
		if ip, err := netip.ParseAddr(name); err == nil {
			queries = append(queries, resolv.Question{Name: strings.TrimSuffix(resolv.ReverseName(ip), "."), Type: dnsmessage.TypePTR})
		} else {
			add(dnsmessage.TypeA)
			add(dnsmessage.TypeAAAA)
		}
	}
	c.Conf.Timeout = time.Duration(timeout) * time.Second / time.Duration(retry)
	out := p.Stdout
	exit := 0
	answered := make([]bool, len(queries))
	for _, server := range servers {
		replies := 0
		for i, q := range queries {
			if answered[i] {
				continue
			}
			fq := strings.TrimSuffix(q.Name, ".") + "."
			a, err := c.Query(p.Ctx(), resolv.Question{Name: fq, Type: q.Type, Servers: []string{server}, Port: port, Tries: retry})
			if err != nil {
				if code, killed := kernel.ExitCause(p.Ctx()); killed {
					return code
				}
				break // busybox sends them all at once: one timing out, the rest have too
			}
			if replies == 0 {
				addr := server + ":" + strconv.Itoa(port)
				if ip, err := netip.ParseAddr(server); err == nil {
					addr = netip.AddrPortFrom(ip, uint16(port)).String()
				}
				fmt.Fprintf(out, "Server:\t\t%s\nAddress:\t%s\n\n", server, addr)
			}
			replies++
			answered[i] = true
			if a.Msg.RCode != dnsmessage.RCodeSuccess {
				fmt.Fprintf(out, "** server can't find %s: %s\n", q.Name, busyboxRcode(a.Msg.RCode))
				exit = 1
			} else {
				busyboxReply(out, a.Msg)
			}
			fmt.Fprintln(out)
		}
		if replies > 0 {
			break
		}
		if server == servers[len(servers)-1] {
			fmt.Fprint(out, ";; connection timed out; no servers could be reached\n\n")
			return 1
		}
	}
	missing := false
	for i, q := range queries {
		if !answered[i] {
			fmt.Fprintf(out, "*** Can't find %s: No answer\n", q.Name)
			missing = true
		}
	}
	if missing {
		fmt.Fprintln(out)
	}
	return exit
}

// busyboxRcode is nslookup.c's rcodes table: the names up to NOTZONE, then the number.
func busyboxRcode(r dnsmessage.RCode) string {
	names := []string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE"}
	if int(r) < len(names) {
		return names[r]
	}
	return strconv.Itoa(int(r) & 0xf)
}

// busyboxReply prints a reply's answer records as parse_reply does: names without their final dot
// (ns_name_uncompress), one line or two per record, the types it does not know left out.
func busyboxReply(out io.Writer, m *dnsmessage.Message) {
	if !m.Authoritative {
		fmt.Fprintln(out, "Non-authoritative answer:")
	}
	bare := func(n dnsmessage.Name) string {
		if s := strings.TrimSuffix(n.String(), "."); s != "" {
			return s
		}
		return "."
	}
	for _, rr := range m.Answers {
		owner := bare(rr.Header.Name)
		switch b := rr.Body.(type) {
		case *dnsmessage.AResource, *dnsmessage.AAAAResource:
			fmt.Fprintf(out, "Name:\t%s\nAddress: %s\n", owner, resolv.RData(rr))
		case *dnsmessage.NSResource:
			fmt.Fprintf(out, "%s\tnameserver = %s\n", owner, bare(b.NS))
		case *dnsmessage.CNAMEResource:
			fmt.Fprintf(out, "%s\tcanonical name = %s\n", owner, bare(b.CNAME))
		case *dnsmessage.PTRResource:
			fmt.Fprintf(out, "%s\tname = %s\n", owner, bare(b.PTR))
		case *dnsmessage.MXResource:
			fmt.Fprintf(out, "%s\tmail exchanger = %d %s\n", owner, b.Pref, bare(b.MX))
		case *dnsmessage.TXTResource:
			if len(b.TXT) > 0 && b.TXT[0] != "" {
				fmt.Fprintf(out, "%s\ttext = \"%s\"\n", owner, b.TXT[0]) // the first string, as printed
			}
		case *dnsmessage.SRVResource:
			fmt.Fprintf(out, "%s\tservice = %d %d %d %s\n", owner, b.Priority, b.Weight, b.Port, bare(b.Target))
		case *dnsmessage.SOAResource:
			fmt.Fprintf(out, "%s\n\torigin = %s\n\tmail addr = %s\n\tserial = %d\n\trefresh = %d\n\tretry = %d\n\texpire = %d\n\tminimum = %d\n",
				owner, bare(b.NS), bare(b.MBox), b.Serial, b.Refresh, b.Retry, b.Expire, b.MinTTL)
		}
	}
}
