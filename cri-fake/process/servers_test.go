package process

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// loopbackListen is a Spec.Listen that binds the requested port's server to
// an ephemeral loopback port and remembers where, so tests never touch port 80.
type loopbackListen struct {
	mu    sync.Mutex
	addrs map[string]string // requested ":80" -> "127.0.0.1:NNNN"
}

func (l *loopbackListen) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs == nil {
		l.addrs = map[string]string{}
	}
	l.addrs[address] = ln.Addr().String()
	return ln, nil
}

func (l *loopbackListen) addr(requested string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[requested]
}

func get(tb testing.TB, url string) (int, string, http.Header) {
	tb.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func TestWebServers(t *testing.T) {
	tests := []struct {
		name       string
		image      string
		args       []string
		port       string
		path       string
		status     int
		body       string
		header     string
		behaviour  Behaviour
		stopSignal syscall.Signal
		stopCode   int
	}{
		{name: "nginx", image: "nginx", args: []string{"nginx", "-g", "daemon off;"}, port: ":80", path: "/", status: 200, body: "Welcome to nginx!", header: "nginx/1.14.2", stopSignal: syscall.SIGTERM},
		{name: "nginx 404", image: "nginx", args: []string{"nginx", "-g", "daemon off;"}, port: ":80", path: "/missing", status: 404, stopSignal: syscall.SIGQUIT},
		{name: "httpd", image: "httpd", args: []string{"httpd-foreground"}, port: ":80", path: "/", status: 200, body: "It works!", header: "Apache", stopSignal: syscall.SIGTERM},
		{name: "netexec hostname", image: "agnhost", args: []string{"/agnhost", "netexec", "--http-port=8080"}, port: ":8080", path: "/hostname", status: 200, body: "srv-1", stopSignal: syscall.SIGTERM},
		{name: "netexec echo", image: "agnhost", args: []string{"/agnhost", "netexec"}, port: ":8080", path: "/echo?msg=ping", status: 200, body: "ping", stopSignal: syscall.SIGTERM},
		{name: "netexec shell", image: "agnhost", args: []string{"/agnhost", "netexec"}, port: ":8080", path: "/shell?cmd=hostname", status: 200, body: `"output":"srv-1\n"`, stopSignal: syscall.SIGTERM},
		// serve-hostname waits 60 s after TERM for the pod's deletion (agnhost_test.go checks it);
		// KILL ends it here.
		{name: "serve-hostname", image: "agnhost", args: []string{"/agnhost", "serve-hostname"}, port: ":9376", path: "/", status: 200, body: "srv-1", stopSignal: syscall.SIGKILL, stopCode: 137},
		{name: "readiness failing", image: "nginx", args: []string{"nginx"}, port: ":80", path: "/healthz", status: 503, behaviour: Behaviour{FailReadiness: true}, stopSignal: syscall.SIGKILL, stopCode: 137},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ll := &loopbackListen{}
			var out syncBuffer
			fsys := newFS(t, FSConfig{Image: BaseLayer(tc.image), Hostname: "srv-1"})
			p := startProc(t, Spec{Args: tc.args, FS: fsys, Hostname: "srv-1", Listen: ll.listen, Stdout: &out, Stderr: &out, Behaviour: tc.behaviour})
			waitFor(t, "listener on "+tc.port, func() bool { return ll.addr(tc.port) != "" })
			status, body, hdr := get(t, "http://"+ll.addr(tc.port)+tc.path)
			if status != tc.status || !strings.Contains(body, tc.body) || !strings.Contains(hdr.Get("Server"), tc.header) {
				t.Errorf("GET %s: %d %q (Server %q), want %d containing %q", tc.path, status, body, hdr.Get("Server"), tc.status, tc.body)
			}
			p.Signal(tc.stopSignal)
			if code := p.Wait(); code != tc.stopCode {
				t.Errorf("exit code after %v = %d, want %d; output %q", tc.stopSignal, code, tc.stopCode, out.String())
			}
		})
	}
}

func TestNginxProcessTable(t *testing.T) {
	ll := &loopbackListen{}
	var out syncBuffer
	p := startProc(t, Spec{Args: []string{"nginx", "-g", "daemon off;"}, FS: newFS(t, FSConfig{Image: BaseLayer("nginx")}), Listen: ll.listen, Stdout: &out})
	waitFor(t, "listener", func() bool { return ll.addr(":80") != "" })
	get(t, "http://"+ll.addr(":80")+"/")
	waitFor(t, "access log", func() bool { return strings.Contains(out.String(), `"GET / HTTP/1.1" 200`) })
	stdout, _, _, _ := p.ExecSync(t.Context(), []string{"sh", "-c", "cat /var/run/nginx.pid; pidof nginx; cat /proc/1/cmdline"}, 0)
	want := "1\n2 1\nnginx: master process nginx -g daemon off;\x00"
	if string(stdout) != want {
		t.Errorf("got %q, want %q", stdout, want)
	}
}

func TestNginxReadonlyRootfsFails(t *testing.T) {
	_, errOut, code := runCmd(t, Spec{Args: []string{"nginx"}, FS: newFS(t, FSConfig{Image: BaseLayer("nginx"), ReadonlyRootfs: true}), Listen: (&loopbackListen{}).listen})
	if code != 1 || !strings.Contains(errOut, `open() "/var/run/nginx.pid" failed (30: Read-only file system)`) {
		t.Errorf("code %d stderr %q", code, errOut)
	}
}

func TestServerBindError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	listen := func(network, address string) (net.Listener, error) { return net.Listen(network, busy.Addr().String()) }
	_, errOut, code := runCmd(t, Spec{Args: []string{"nginx"}, FS: newFS(t, FSConfig{Image: BaseLayer("nginx")}), Listen: listen})
	if code != 1 || !strings.Contains(errOut, "bind() to 0.0.0.0:80 failed (98: Address already in use)") {
		t.Errorf("code %d stderr %q", code, errOut)
	}
}

// TestListenInNetNS checks that a server started with Spec.NetNS listens
// inside that namespace and not on the host. It needs root and runs only in
// a namespace it creates (no route anywhere).
func TestListenInNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	netns := loopbackNetNS(t)
	port := freePortIn(t, netns)
	fsys := newFS(t, FSConfig{Image: BaseLayer("agnhost")})
	p := startProc(t, Spec{Args: []string{"/agnhost", "netexec", fmt.Sprintf("--http-port=%d", port)}, FS: fsys, Hostname: "in-ns", NetNS: netns.Path()})

	var body string
	waitFor(t, "server inside the namespace", func() bool {
		// Dial on this goroutine's thread inside the namespace (net/http
		// would dial from another goroutine, in the host namespace).
		var conn net.Conn
		_ = netns.Do(func(ns.NetNS) error {
			var err error
			conn, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			return err
		})
		if conn == nil {
			return false
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /hostname HTTP/1.0\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return body != ""
	})
	if body != "in-ns" {
		t.Errorf("body %q", body)
	}
	// PortForward's path: a connection made from inside the namespace.
	conn, err := DialInNetNS(t.Context(), netns.Path(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("DialInNetNS: %v", err)
	}
	fmt.Fprintf(conn, "GET /echo?msg=pf HTTP/1.0\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	conn.Close()
	if string(b) != "pf" {
		t.Errorf("through DialInNetNS: %q", b)
	}
	// The host namespace has no listener on that port from this server.
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
		c.Close()
		t.Errorf("port %d answers in the host namespace", port)
	}
	// netstat inside the container reads the namespace's own socket table.
	out, _, _, _ := p.ExecSync(t.Context(), []string{"netstat", "-ln"}, 0)
	if !strings.Contains(string(out), fmt.Sprintf(":%d", port)) {
		t.Errorf("netstat -ln in the namespace: %q", out)
	}
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// loopbackNetNS creates a network namespace with only lo, up, for the test's life: nothing in it
// routes anywhere.
func loopbackNetNS(tb testing.TB) ns.NetNS {
	tb.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		tb.Fatalf("create netns: %v", err)
	}
	tb.Cleanup(func() {
		netns.Close()
		testutils.UnmountNS(netns)
	})
	// lo starts down in a new namespace.
	if err := netns.Do(func(ns.NetNS) error { return setLinkUp("lo") }); err != nil {
		tb.Fatalf("lo up: %v", err)
	}
	return netns
}

func freePortIn(tb testing.TB, netns ns.NetNS) int {
	tb.Helper()
	var port int
	err := netns.Do(func(ns.NetNS) error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = l.Addr().(*net.TCPAddr).Port
		return l.Close()
	})
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

func setLinkUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}
