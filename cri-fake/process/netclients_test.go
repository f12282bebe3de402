package process

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/plugsim/plugsim/cri-fake/process/resolv/dnstest"
)

// clusterNet is a network namespace a test made, standing in for a pod's: lo up, with a
// "cluster DNS" address (10.96.0.10), a "pod" address (10.244.1.5) and the API server's
// (10.96.0.1) on it, a DNS server on
// 10.96.0.10:53 (UDP and TCP) holding a cluster-like zone, and an HTTP server on 10.244.1.5:8080.
// Nothing in it routes anywhere.
type clusterNet struct {
	ns  ns.NetNS
	dns *dnstest.Server
}

const (
	clusterDNSIP = "10.96.0.10"
	podIP        = "10.244.1.5"
	apiServerIP  = "10.96.0.1" // the kubernetes Service's ClusterIP
)

func newClusterNet(t *testing.T) *clusterNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	netns := loopbackNetNS(t)
	err := netns.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, a := range []string{clusterDNSIP + "/32", podIP + "/32", apiServerIP + "/32"} {
			addr, _ := netlink.ParseAddr(a)
			if err := netlink.AddrAdd(lo, addr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("addresses: %v", err)
	}
	srv := dnstest.New()
	srv.A("kubernetes.default.svc.cluster.local", "10.96.0.1")
	srv.A("web.ns1.svc.cluster.local", podIP)
	srv.A("headless.ns1.svc.cluster.local", "10.244.1.6")
	srv.A("headless.ns1.svc.cluster.local", "10.244.1.7")
	srv.A("v6.ns1.svc.cluster.local", "fd00::5")
	srv.SRV("_http._tcp.web.ns1.svc.cluster.local", 0, 100, 8080, "web.ns1.svc.cluster.local")
	srv.PTR("1.0.96.10.in-addr.arpa", "kubernetes.default.svc.cluster.local")
	srv.CNAME("ext.ns1.svc.cluster.local", "foo.example.com")
	srv.A("foo.example.com", podIP)
	for _, n := range []string{"agnhost-primary", "agnhost-replica", "mtls"} {
		srv.A(n+".ns1.svc.cluster.local", podIP)
	}
	var udp net.PacketConn
	var tcp, http8080 net.Listener
	err = netns.Do(func(ns.NetNS) error {
		var err error
		if udp, err = net.ListenPacket("udp", clusterDNSIP+":53"); err != nil {
			return err
		}
		if tcp, err = net.Listen("tcp", clusterDNSIP+":53"); err != nil {
			return err
		}
		http8080, err = net.Listen("tcp", podIP+":8080")
		return err
	})
	if err != nil {
		t.Fatalf("listen in the namespace: %v", err)
	}
	go srv.ServeUDP(udp)
	go srv.ServeTCP(tcp)
	mux := http.NewServeMux()
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "web-0") })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		fmt.Fprintf(w, "%s %s", r.Method, r.FormValue("msg"))
	})
	mux.HandleFunc("/missing", http.NotFound)
	hs := &http.Server{Handler: mux}
	go hs.Serve(http8080)
	t.Cleanup(func() {
		udp.Close()
		tcp.Close()
		hs.Close()
	})
	return &clusterNet{ns: netns, dns: srv}
}

// run runs script with sh in a container of the given image base inside the namespace, with
// the cluster's resolv.conf (search path and ndots 5, as the kubelet writes it).
func (c *clusterNet) run(t *testing.T, base, script string) (string, string, int) {
	t.Helper()
	fsys := newFS(t, FSConfig{Image: BaseLayer(base), Hostname: "client", IPs: []string{podIP}, DNS: &DNSConfig{
		Servers:  []string{clusterDNSIP},
		Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:  []string{"ndots:5"},
	}})
	return runCmd(t, Spec{Args: []string{"sh", "-c", script}, FS: fsys, Hostname: "client", NetNS: c.ns.Path()})
}

// TestDNSClients checks dig, nslookup and getent against a real DNS server reached from the
// container's network namespace, in the forms the conformance specs run them
// (test/e2e/network/dns_common.go:410-465, framework/service/jig.go:977) and with the output BIND
// 9.18 and glibc print.
func TestDNSClients(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	tests := []struct {
		name, base, script string
		code               int
		stdout             string // a regexp the whole stdout must match
	}{
		{"dig +short", "agnhost", "dig +short kubernetes.default.svc.cluster.local", 0, `^10\.96\.0\.1\n$`},
		{"dig +short +search short name", "agnhost", "dig +short +search web", 0, `^10\.244\.1\.5\n$`},
		{"dig without +search asks the name as given", "agnhost", "dig +short web", 0, `^$`},
		{"dig +notcp +noall +answer +search (UDP spec probe)", "agnhost", "dig +notcp +noall +answer +search web.ns1 A", 0,
			"^web\\.ns1\\.svc\\.cluster\\.local\\. 30\tIN\tA\t10\\.244\\.1\\.5\n$"},
		{"dig +tcp +noall +answer +search (TCP spec probe)", "glibc-dns", "dig +tcp +noall +answer +search kubernetes.default.svc.cluster.local A", 0,
			`^kubernetes\.default\.svc\.cluster\.local\. 30 IN A\t10\.96\.0\.1\n$`},
		{"dig SRV", "agnhost", "dig +notcp +noall +answer +search _http._tcp.web.ns1.svc SRV", 0,
			"^_http\\._tcp\\.web\\.ns1\\.svc\\.cluster\\.local\\. 30 IN SRV\t0 100 8080 web\\.ns1\\.svc\\.cluster\\.local\\.\n$"},
		{"dig type before the name", "agnhost", "dig +short SRV _http._tcp.web.ns1.svc.cluster.local", 0,
			`^0 100 8080 web\.ns1\.svc\.cluster\.local\.\n$`},
		{"dig type and class before the name, +search", "agnhost", "dig +search +short IN SRV _http._tcp.web.ns1.svc", 0,
			`^0 100 8080 web\.ns1\.svc\.cluster\.local\.\n$`},
		{"dig PTR", "agnhost", "dig +notcp +noall +answer +search 1.0.96.10.in-addr.arpa. PTR", 0,
			`^1\.0\.96\.10\.in-addr\.arpa\.\t30\tIN\tPTR\tkubernetes\.default\.svc\.cluster\.local\.\n$`},
		{"dig -x", "agnhost", "dig +short -x 10.96.0.1", 0, `^kubernetes\.default\.svc\.cluster\.local\.\n$`},
		{"dig AAAA", "agnhost", "dig +short v6.ns1.svc.cluster.local AAAA", 0, `^fd00::5\n$`},
		{"dig CNAME chain +short", "agnhost", "dig +short ext.ns1.svc.cluster.local", 0, `^foo\.example\.com\.\n10\.244\.1\.5\n$`},
		{"dig CNAME type", "agnhost", "dig +short ext.ns1.svc.cluster.local CNAME", 0, `^foo\.example\.com\.\n$`},
		{"dig headless: both pods", "agnhost", "dig +short headless.ns1.svc.cluster.local | sort", 0, `^10\.244\.1\.6\n10\.244\.1\.7\n$`},
		{"dig NXDOMAIN is still exit 0", "agnhost", "dig nothing.ns1.svc.cluster.local", 0, `(?s)status: NXDOMAIN, id: \d+\n;; flags: qr aa rd; QUERY: 1, ANSWER: 0`},
		{"dig full output", "agnhost", "dig kubernetes.default.svc.cluster.local", 0,
			`(?s)^\n; <<>> DiG 9\.18\.33 <<>> kubernetes\.default\.svc\.cluster\.local\n;; global options: \+cmd\n;; Got answer:\n;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: \d+\n` +
				`;; flags: qr aa rd; QUERY: 1, ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1\n;; WARNING: recursion requested but not available\n\n` +
				`;; OPT PSEUDOSECTION:\n; EDNS: version: 0, flags:; udp: 1232\n;; QUESTION SECTION:\n;kubernetes\.default\.svc\.cluster\.local\. IN A\n\n` +
				`;; ANSWER SECTION:\nkubernetes\.default\.svc\.cluster\.local\. 30 IN A\t10\.96\.0\.1\n\n;; Query time: \d+ msec\n` +
				`;; SERVER: 10\.96\.0\.10#53\(10\.96\.0\.10\) \(UDP\)\n;; WHEN: .+\n;; MSG SIZE  rcvd: \d+\n\n$`},
		{"dig @server -p to nothing", "agnhost", "dig +short +tries=1 +time=1 @127.0.0.1 -p 5353 web.ns1.svc.cluster.local", 9,
			`^;; communications error to 127\.0\.0\.1#5353: connection refused\n;; no servers could be reached\n$`},
		{"spec probe loop writes OK", "agnhost", `check="$(dig +notcp +noall +answer +search web.ns1.svc A)" && test -n "$check" && echo OK`, 0, `^OK\n$`},
		{"spec probe fails on NXDOMAIN", "agnhost", `check="$(dig +notcp +noall +answer +search nothing A)" && test -n "$check" && echo OK`, 1, `^$`},
		{"nslookup", "agnhost", "nslookup kubernetes.default", 0,
			"^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10#53\n\nName:\tkubernetes\\.default\\.svc\\.cluster\\.local\nAddress: 10\\.96\\.0\\.1\n\n$"},
		{"nslookup ExternalName", "agnhost", "nslookup ext.ns1.svc.cluster.local", 0,
			"^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10#53\n\next\\.ns1\\.svc\\.cluster\\.local\tcanonical name = foo\\.example\\.com\\.\nName:\tfoo\\.example\\.com\nAddress: 10\\.244\\.1\\.5\n\n$"},
		{"nslookup NXDOMAIN", "agnhost", "nslookup nothing", 1, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10#53\n\n\\*\\* server can't find nothing: NXDOMAIN\n\n$"},
		// busybox 1.36's own nslookup (networking/nslookup.c): A and AAAA each over the search list for a
		// name without a dot (every NXDOMAIN printed, and exit 1), none for a dotted one (the
		// "kubernetes.default" NXDOMAIN of Kubernetes' DNS debugging page), an empty line per reply.
		{"busybox nslookup short name", "busybox", "nslookup web", 1, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10:53\n\nName:\tweb\\.ns1\\.svc\\.cluster\\.local\nAddress: 10\\.244\\.1\\.5\n\n" +
			"\\*\\* server can't find web\\.svc\\.cluster\\.local: NXDOMAIN\n\n\\*\\* server can't find web\\.cluster\\.local: NXDOMAIN\n\n\n" +
			"\\*\\* server can't find web\\.svc\\.cluster\\.local: NXDOMAIN\n\n\\*\\* server can't find web\\.cluster\\.local: NXDOMAIN\n\n$"},
		{"busybox nslookup dotted name: no search", "busybox", "nslookup kubernetes.default", 1, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10:53\n\n" +
			"\\*\\* server can't find kubernetes\\.default: NXDOMAIN\n\n\\*\\* server can't find kubernetes\\.default: NXDOMAIN\n\n$"},
		{"busybox nslookup FQDN", "busybox", "nslookup kubernetes.default.svc.cluster.local", 0, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10:53\n\nName:\tkubernetes\\.default\\.svc\\.cluster\\.local\nAddress: 10\\.96\\.0\\.1\n\n\n$"},
		{"busybox nslookup address", "busybox", "nslookup 10.96.0.1", 0, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10:53\n\n1\\.0\\.96\\.10\\.in-addr\\.arpa\tname = kubernetes\\.default\\.svc\\.cluster\\.local\n\n$"},
		{"busybox nslookup -type=srv", "busybox", "nslookup -type=srv _http._tcp.web.ns1.svc.cluster.local", 0, "^Server:\t\t10\\.96\\.0\\.10\nAddress:\t10\\.96\\.0\\.10:53\n\n_http\\._tcp\\.web\\.ns1\\.svc\\.cluster\\.local\tservice = 0 100 8080 web\\.ns1\\.svc\\.cluster\\.local\n\n$"},
		{"busybox nslookup to nothing", "busybox", "nslookup -timeout=1 -retry=1 web 127.0.0.1", 1, "^;; connection timed out; no servers could be reached\n\n$"},
		{"busybox nslookup bad type", "busybox", "nslookup -type=bogus web", 1, "^$"},
		{"getent hosts from /etc/hosts", "agnhost", "getent hosts client", 0, `^10\.244\.1\.5\s+client\n$`},
		{"getent hosts through DNS", "glibc-dns", "getent hosts web", 0, `^10\.244\.1\.5\s+web\.ns1\.svc\.cluster\.local web\n$`},
		{"getent hosts localhost prefers IPv6", "agnhost", "getent hosts localhost", 0, `^::1\s+localhost ip6-localhost ip6-loopback\n$`},
		{"getent hosts unknown", "agnhost", "getent hosts nothing", 2, `^$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			if base == "glibc-dns" {
				base = "debian"
			}
			out, errOut, code := c.run(t, base, tc.script)
			if code != tc.code || !regexp.MustCompile(tc.stdout).MatchString(out) {
				t.Errorf("%s\ncode %d (want %d)\nstdout %q\nwant   %q\nstderr %q", tc.script, code, tc.code, out, tc.stdout, errOut)
			}
		})
	}
	if c.dns.TCP.Load() == 0 || c.dns.UDP.Load() == 0 {
		t.Errorf("queries over UDP %d, TCP %d: both transports should have been used", c.dns.UDP.Load(), c.dns.TCP.Load())
	}
}

// TestDNSTruncatedRetriesOverTCP: a truncated UDP answer is asked again over TCP, as resolvers do.
func TestDNSTruncatedRetriesOverTCP(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	c.dns.Truncate.Store(1)
	out, errOut, code := c.run(t, "agnhost", "dig +short headless.ns1.svc.cluster.local | sort; getent hosts headless.ns1.svc.cluster.local | wc -l")
	if code != 0 || out != "10.244.1.6\n10.244.1.7\n2\n" {
		t.Errorf("code %d stdout %q stderr %q", code, out, errOut)
	}
	if c.dns.TCP.Load() < 2 {
		t.Errorf("TCP queries %d, want the retries", c.dns.TCP.Load())
	}
}

// TestCurlAndNc runs curl and nc against servers in the namespace, in the forms the specs use
// (test/e2e/framework/network/utils.go:307,454,490-502, common/node/lifecycle_hook.go:167).
func TestCurlAndNc(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	// A UDP echo and a TCP server that answers a line and closes, as agnhost's UDP and
	// serve-hostname's TCP servers do.
	var udp net.PacketConn
	var tcp net.Listener
	err := c.ns.Do(func(ns.NetNS) error {
		var err error
		if udp, err = net.ListenPacket("udp", podIP+":8081"); err != nil {
			return err
		}
		tcp, err = net.Listen("tcp", podIP+":9376")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close(); tcp.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, addr, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if strings.TrimSpace(string(buf[:n])) == "hostName" {
				udp.WriteTo([]byte("web-0"), addr)
			}
		}
	}()
	go func() {
		for {
			conn, err := tcp.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("web-0"))
			conn.Close()
		}
	}()
	tests := []struct {
		name, script   string
		code           int
		stdout, stderr string // regexps
	}{
		{"curl by IP", "curl -g -q -s http://" + podIP + ":8080/hostname", 0, `^web-0$`, `^$`},
		{"curl by name through the search path", "curl -q -s --connect-timeout 5 http://web:8080/hostname", 0, `^web-0$`, `^$`},
		{"curl -w http_code", "curl -g -q -s -o /dev/null -w %{http_code} http://" + podIP + ":8080/missing", 0, `^404$`, `^$`},
		{"curl -f", "curl -sS -f http://" + podIP + ":8080/missing", 22, `^$`, `^curl: \(22\) The requested URL returned error: 404\n$`},
		{"curl --data posts", "curl -s --data msg=hi http://" + podIP + ":8080/echo", 0, `^POST hi$`, `^$`},
		{"curl -i", "curl -s -i http://" + podIP + ":8080/hostname", 0, `(?s)^HTTP/1\.1 200 OK\r\n.*Content-Length: 5\r\n.*\r\n\r\nweb-0$`, `^$`},
		{"curl refused", "curl -sS --connect-timeout 10 http://" + podIP + ":1/", 7, `^$`, `^curl: \(7\) Failed to connect to 10\.244\.1\.5 port 1 after \d+ ms: Could not connect to server\n$`},
		{"curl refused silent", "curl -s http://" + podIP + ":1/", 7, `^$`, `^$`},
		{"curl unknown host", "curl -sS http://nothing:8080/", 6, `^$`, `^curl: \(6\) Could not resolve host: nothing\n$`},
		{"curl refused -w prints 000", "curl -s -o /dev/null -w %{http_code} http://" + podIP + ":1/", 7, `^000$`, `^$`},
		{"nc -v tcp", "echo hostName | nc -v -t -w 10 " + podIP + " 9376", 0, `^web-0$`, `^Connection to 10\.244\.1\.5 9376 port \[tcp/\*\] succeeded!\n$`},
		// The UDP clients end on nc's -w (no UDP peer closes): one shell runs both at once.
		{"nc udp, by IP and by name", "echo hostName | nc -w 10 -u " + podIP + " 8081 >/tmp/1 & echo hostName | nc -v -u -w 10 web 8081 >/tmp/2 & wait; cat /tmp/1; echo; cat /tmp/2", 0,
			`^web-0\nweb-0$`, `^Connection to web 8081 port \[udp/\*\] succeeded!\n$`},
		{"nc -z", "nc -z -v " + podIP + " 8080", 0, `^$`, `^Connection to 10\.244\.1\.5 8080 port \[tcp/http-alt\] succeeded!\n$`},
		{"nc refused", "nc -w 10 " + podIP + " 1 </dev/null", 1, `^$`, `^nc: connect to 10\.244\.1\.5 port 1 \(tcp\) failed: Connection refused\n$`},
		{"nc unknown host", "nc -w 10 nothing 80 </dev/null", 1, `^$`, `^nc: getaddrinfo for host "nothing" port 80: Name does not resolve\n$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := c.run(t, "agnhost", tc.script)
			if code != tc.code || !regexp.MustCompile(tc.stdout).MatchString(out) || !regexp.MustCompile(tc.stderr).MatchString(errOut) {
				t.Errorf("%s\ncode %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", tc.script, code, tc.code, out, tc.stdout, errOut, tc.stderr)
			}
		})
	}
}
