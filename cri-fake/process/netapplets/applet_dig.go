package netapplets

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// digVersion is the BIND release whose dig this is: bind-tools in the agnhost image's Alpine
// and dnsutils in glibc-dns-testing's Debian bookworm are both 9.18.
const digVersion = "9.18.33"

// digOpts are dig's options (bin/dig/dig.c, dighost.c of BIND 9.18) that are simulated.
type digOpts struct {
	name    string
	qtype   dnsmessage.Type
	typeSet bool
	servers []string
	port    int
	tcp     bool
	search  bool
	short   bool
	edns    bool
	timeout time.Duration
	tries   int
	recurse bool
	// The sections printed (+[no]all and each of its parts).
	cmd, comments, question, answer, authority, additional, stats bool
}

func (o *digOpts) all(on bool) {
	o.cmd, o.comments, o.question, o.answer, o.authority, o.additional, o.stats = on, on, on, on, on, on, on
}

// digUsage is the start of dig's -h text.
const digUsage = `Usage:  dig [@global-server] [domain] [q-type] [q-class] {q-opt}
            {global-d-opt} host [@local-server] {local-d-opt}
            [ host [@local-server] {local-d-opt} [...]]
`

func parseDigArgs(args []string) (digOpts, error) {
	o := digOpts{qtype: dnsmessage.TypeA, port: 53, edns: true, timeout: 5 * time.Second, tries: 3, recurse: true}
	o.all(true)
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if len(a) > 2 {
				return a[2:], nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("option requires an argument -- '%c'", a[1])
			}
			i++
			return args[i], nil
		}
		switch {
		case strings.HasPrefix(a, "@"):
			o.servers = append(o.servers, a[1:])
		case strings.HasPrefix(a, "+"):
			if err := o.queryOption(a[1:]); err != nil {
				return o, err
			}
		case a == "-4" || a == "-6" || a == "-m" || a == "-u" || a == "-r":
		case strings.HasPrefix(a, "-p"):
			v, err := next()
			if err != nil {
				return o, err
			}
			p, err := strconv.Atoi(v)
			if err != nil || p < 0 || p > 65535 {
				return o, fmt.Errorf("invalid port number '%s'", v)
			}
			o.port = p
		case strings.HasPrefix(a, "-t"):
			v, err := next()
			if err != nil {
				return o, err
			}
			t, ok := resolv.ParseType(v)
			if !ok {
				return o, fmt.Errorf("invalid type '%s'", v)
			}
			o.qtype, o.typeSet = t, true
		case strings.HasPrefix(a, "-q"):
			v, err := next()
			if err != nil {
				return o, err
			}
			o.name = v
		case strings.HasPrefix(a, "-x"):
			v, err := next()
			if err != nil {
				return o, err
			}
			ip, perr := netip.ParseAddr(v)
			if perr != nil {
				return o, fmt.Errorf("'%s' is not a legal IPv4 or IPv6 address", v)
			}
			o.name = resolv.ReverseName(ip)
			o.qtype, o.typeSet = dnsmessage.TypePTR, true
		case strings.HasPrefix(a, "-c"):
			if _, err := next(); err != nil {
				return o, err
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return o, fmt.Errorf("Invalid option: %s", a)
		default:
			// A type or class is taken as one wherever it stands, before the name as after it
			// (dig.c's parse_args: `dig SRV _http._tcp.web` asks for web's SRV records).
			if t, ok := resolv.ParseType(a); ok && !o.typeSet {
				o.qtype, o.typeSet = t, true
				continue
			}
			if strings.EqualFold(a, "IN") {
				continue
			}
			if o.name != "" {
				// dig starts a second lookup; only one is simulated.
				return o, fmt.Errorf("more than one name (%s, %s): one lookup at a time is simulated", o.name, a)
			}
			o.name = a
		}
	}
	if o.name == "" {
		// dig with no name asks for the root's NS records.
		o.name = "."
		if !o.typeSet {
			o.qtype = dnsmessage.TypeNS
		}
	}
	return o, nil
}

// queryOption applies one +[no]keyword[=value].
func (o *digOpts) queryOption(s string) error {
	on := true
	kw := s
	if rest, ok := strings.CutPrefix(s, "no"); ok {
		on, kw = false, rest
	}
	kw, val, hasVal := strings.Cut(kw, "=")
	num := func() (int, error) {
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 0 {
			return 0, fmt.Errorf("Invalid option: +%s", s)
		}
		return n, nil
	}
	switch kw {
	case "tcp", "vc":
		o.tcp = on
	case "search":
		o.search = on
	case "short":
		o.short = on
		if on {
			o.all(false)
			o.answer = true
		}
	case "all":
		o.all(on)
	case "answer":
		o.answer = on
	case "question":
		o.question = on
	case "authority":
		o.authority = on
	case "additional":
		o.additional = on
	case "comments":
		o.comments = on
	case "stats":
		o.stats = on
	case "cmd":
		o.cmd = on
	case "edns":
		o.edns = on
	case "recurse":
		o.recurse = on
	case "time":
		n, err := num()
		if err != nil {
			return err
		}
		o.timeout = time.Duration(max(n, 1)) * time.Second
	case "tries", "retry":
		n, err := num()
		if err != nil {
			return err
		}
		if kw == "retry" {
			n++
		}
		o.tries = max(n, 1)
	case "cookie", "adflag", "cdflag", "identify", "ttlid", "class", "rrcomments", "multiline", "defname", "domain", "fail", "besteffort", "ignore", "keepopen", "showsearch":
		// Accepted; they change nothing the simulation prints.
	default:
		return fmt.Errorf("Invalid option: +%s", s)
	}
	return nil
}

// Dig is BIND 9.18's dig: it sends the query to the resolv.conf servers (or @server) from the
// container's network namespace, over UDP (+notcp, the default) or TCP (+tcp), tries the search
// list with +search (ndots from resolv.conf), and prints the answer as dig does: the full
// message by default, the answer records with +noall +answer, their data alone with +short. Its
// exit codes are dig's: 0 when any server answered (NXDOMAIN included), 9 when none did, 1 for a
// usage error, 10 for a bad name.
func Dig(p *kernel.Proc) int {
	o, err := parseDigArgs(p.Args[1:])
	if err != nil {
		fmt.Fprintln(p.Stderr, err)
		fmt.Fprint(p.Stderr, digUsage)
		return 1
	}
	c, _ := resolv.ForProc(p)
	c.Conf.Timeout = o.timeout
	conf := c.Conf
	candidates := []string{o.name}
	if !strings.HasSuffix(o.name, ".") {
		candidates = []string{o.name + "."}
		if o.search {
			candidates = conf.Candidates(o.name)
		}
	}
	w := p.Stdout
	if o.cmd {
		fmt.Fprintf(w, "\n; <<>> DiG %s <<>> %s\n", digVersion, strings.Join(p.Args[1:], " "))
		fmt.Fprintln(w, ";; global options: +cmd")
	}
	for i, name := range candidates {
		if _, err := dnsmessage.NewName(name); err != nil {
			fmt.Fprintf(p.Stderr, "dig: '%s' is not a legal name (label too long)\n", strings.TrimSuffix(name, "."))
			return 10
		}
		a, err := c.Query(p.Ctx(), resolv.Question{
			Name: name, Type: o.qtype, TCP: o.tcp, EDNS: o.edns, Servers: o.servers, Port: o.port, Tries: o.tries,
			Failed: func(server string, port int, err error) {
				what := "timed out"
				if !resolv.IsTimeout(err) {
					what = digStrerror(err)
				}
				fmt.Fprintf(w, ";; communications error to %s#%d: %s\n", server, port, what)
			},
		})
		if err != nil {
			if code, killed := kernel.ExitCause(p.Ctx()); killed {
				return code
			}
			fmt.Fprintln(w, ";; no servers could be reached")
			return 9
		}
		last := i == len(candidates)-1
		// +search moves on to the next name on NXDOMAIN or an empty answer (dighost.c
		// next_origin); the last name's answer is printed whatever it is.
		if !last && (a.Msg.RCode == dnsmessage.RCodeNameError || a.Msg.RCode == dnsmessage.RCodeSuccess && len(a.Msg.Answers) == 0) {
			continue
		}
		printDig(w, o, a, !o.recurse)
		return 0
	}
	return 0
}

// digStrerror words a failed exchange as dig does (isc_result_totext): "connection refused"
// for an ICMP port unreachable, the error's own text otherwise.
func digStrerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNREFUSED:
			return "connection refused"
		case syscall.ENETUNREACH:
			return "network unreachable"
		case syscall.EHOSTUNREACH:
			return "host unreachable"
		}
		return strings.ToLower(vfs.Strerror(errno))
	}
	return err.Error()
}

// printDig prints an answer in dig's layout (dighost.c printmessage, 9.18).
func printDig(w io.Writer, o digOpts, a resolv.Answer, noRecurse bool) {
	m := a.Msg
	if o.short {
		for _, rr := range m.Answers {
			fmt.Fprintln(w, resolv.RData(rr))
		}
		return
	}
	opt, additionals := splitOPT(m.Additionals)
	if o.comments {
		fmt.Fprintln(w, ";; Got answer:")
		fmt.Fprintf(w, ";; ->>HEADER<<- opcode: QUERY, status: %s, id: %d\n", resolv.RcodeString(m.RCode), m.ID)
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{m.Response, "qr"}, {m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.RecursionDesired, "rd"}, {m.RecursionAvailable, "ra"}, {m.AuthenticData, "ad"}, {m.CheckingDisabled, "cd"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		fmt.Fprintf(w, ";; flags: %s; QUERY: %d, ANSWER: %d, AUTHORITY: %d, ADDITIONAL: %d\n",
			strings.Join(flags, " "), len(m.Questions), len(m.Answers), len(m.Authorities), len(m.Additionals))
		if m.RecursionDesired && !m.RecursionAvailable && !noRecurse {
			fmt.Fprintln(w, ";; WARNING: recursion requested but not available")
		}
		fmt.Fprintln(w)
		if opt != nil {
			fmt.Fprintln(w, ";; OPT PSEUDOSECTION:")
			fmt.Fprintf(w, "; EDNS: version: 0, flags:; udp: %d\n", opt.Header.Class)
		}
	}
	if o.question {
		if o.comments {
			fmt.Fprintln(w, ";; QUESTION SECTION:")
		}
		for _, q := range m.Questions {
			fmt.Fprintln(w, questionLine(q))
		}
		if o.comments {
			fmt.Fprintln(w)
		}
	}
	for _, sec := range []struct {
		on    bool
		title string
		rrs   []dnsmessage.Resource
	}{{o.answer, "ANSWER", m.Answers}, {o.authority, "AUTHORITY", m.Authorities}, {o.additional, "ADDITIONAL", additionals}} {
		if !sec.on || len(sec.rrs) == 0 {
			continue
		}
		if o.comments {
			fmt.Fprintf(w, ";; %s SECTION:\n", sec.title)
		}
		for _, rr := range sec.rrs {
			fmt.Fprintln(w, resolv.RRLine(rr))
		}
		if o.comments {
			fmt.Fprintln(w)
		}
	}
	if o.stats {
		proto := "UDP"
		if a.TCP {
			proto = "TCP"
		}
		fmt.Fprintf(w, ";; Query time: %d msec\n", a.RTT.Milliseconds())
		fmt.Fprintf(w, ";; SERVER: %s#%d(%s) (%s)\n", a.Server, a.Port, a.Server, proto)
		fmt.Fprintf(w, ";; WHEN: %s\n", time.Now().Format("Mon Jan 02 15:04:05 MST 2006"))
		fmt.Fprintf(w, ";; MSG SIZE  rcvd: %d\n\n", a.Size)
	}
}

func splitOPT(rrs []dnsmessage.Resource) (*dnsmessage.Resource, []dnsmessage.Resource) {
	var opt *dnsmessage.Resource
	var rest []dnsmessage.Resource
	for i, rr := range rrs {
		if rr.Header.Type == dnsmessage.TypeOPT {
			opt = &rrs[i]
			continue
		}
		rest = append(rest, rr)
	}
	return opt, rest
}

// questionLine is a question as dig prints it: ";name" then class and type in BIND's columns.
func questionLine(q dnsmessage.Question) string {
	var b strings.Builder
	b.WriteString(";" + q.Name.String())
	col := b.Len()
	to := func(target int) {
		if col >= target {
			b.WriteByte(' ')
			col++
			return
		}
		for col < target {
			b.WriteByte('\t')
			col = (col/8 + 1) * 8
		}
	}
	to(32)
	cls := resolv.ClassString(q.Class)
	b.WriteString(cls)
	col += len(cls)
	to(40)
	b.WriteString(resolv.TypeString(q.Type))
	return b.String()
}
