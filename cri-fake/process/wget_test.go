package process

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// wgetServer is an HTTP server on the host's loopback for wget to fetch from (a container with no
// Spec.NetNS is in the host's namespace, as a host-network pod is in the node's).
func wgetServer(tb testing.TB) string {
	tb.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "root") })
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "srv-1") })
	mux.HandleFunc("/agent", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", r.UserAgent(), r.Header.Get("X-Test"))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/hostname", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://no.such.name/", http.StatusFound)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestWget(t *testing.T) {
	srv := wgetServer(t)
	refused := refusedAddr(t)
	tests := []struct {
		name           string
		script         string
		code           int
		stdout, stderr string // substrings; stdout "" means empty
	}{
		{name: "qO- to stdout", script: "wget -qO- http://" + srv + "/hostname", stdout: "srv-1"},
		{name: "-q -O - to stdout", script: "wget -q -O - http://" + srv + "/hostname", stdout: "srv-1"},
		{name: "no scheme", script: "wget -qO- " + srv + "/hostname", stdout: "srv-1"},
		{name: "not quiet", script: "wget -O- http://" + srv + "/hostname", stdout: "srv-1", stderr: "Connecting to " + srv + " (" + srv + ")\nwriting to stdout\n written to stdout\n"},
		{name: "to the URL's base name", script: "cd /tmp && wget http://" + srv + "/hostname && cat /tmp/hostname", stdout: "srv-1", stderr: "saving to 'hostname'\n'hostname' saved"},
		{name: "-O file", script: "wget -q -O /tmp/out http://" + srv + "/hostname && cat /tmp/out", stdout: "srv-1"},
		{name: "index.html", script: "cd /tmp && wget -q http://" + srv + "/ && cat index.html", stdout: "root"},
		{name: "user agent and header", script: "wget -qO- -U probe --header 'X-Test: yes' http://" + srv + "/agent", stdout: "probe|yes"},
		{name: "default user agent", script: "wget -qO- http://" + srv + "/agent", stdout: "Wget|"},
		{name: "redirect followed", script: "wget -qO- http://" + srv + "/moved", stdout: "srv-1"},
		{name: "redirect loop bounded", script: "wget -qO- http://" + srv + "/loop", code: 1, stderr: "too many redirects"},
		{name: "redirect to a name", script: "wget -qO- http://" + srv + "/elsewhere", code: 1, stderr: "wget: bad address 'no.such.name'"},
		{name: "404", script: "wget -qO- http://" + srv + "/missing", code: 1, stderr: "wget: server returned error: HTTP/1.1 404 Not Found"},
		{name: "-S", script: "wget -S -qO- http://" + srv + "/hostname", stdout: "srv-1", stderr: "  HTTP/1.1 200 OK\n"},
		{name: "spider", script: "wget --spider http://" + srv + "/hostname", stderr: "remote file exists"},
		{name: "refused", script: "wget -qO- http://" + refused + "/", code: 1, stderr: "wget: can't connect to remote host (127.0.0.1): Connection refused"},
		{name: "-T 0 is no timeout", script: "wget -T 0 -qO- http://" + srv + "/hostname", stdout: "srv-1"},
		{name: "timeout", script: "wget -T 1 -qO- http://" + srv + "/hang", code: 1, stderr: "wget: download timed out"},
		{name: "a name is not resolved", script: "wget -qO- http://no.such.name/", code: 1, stderr: "wget: bad address 'no.such.name'"},
		{name: "https not simulated", script: "wget -qO- https://127.0.0.1/", code: 1, stderr: "https:// is not simulated"},
		{name: "bad option", script: "wget -Z http://" + srv + "/", code: 1, stderr: "wget: unrecognized option '-Z'"},
		{name: "no URL", script: "wget", code: 1, stderr: "wget: URL is required"},
		{name: "bad timeout", script: "wget -T x http://" + srv + "/", code: 1, stderr: "wget: invalid number 'x'"},
		{name: "read-only target", script: "wget -q -O /proc/x http://" + srv + "/hostname", code: 1, stderr: "wget: can't open '/proc/x'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := sh(t, nil, tc.script)
			if code != tc.code || (tc.stdout == "" && stdout != "") || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("%s: code %d stdout %q stderr %q; want code %d stdout %q stderr containing %q", tc.script, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// Without a kernel namespace (Spec.Listen) a container has no network to connect from.
func TestWgetWithoutNetNS(t *testing.T) {
	srv := wgetServer(t)
	_, stderr, code := runCmd(t, Spec{Args: []string{"wget", "-qO-", "http://" + srv + "/hostname"}, FS: newFS(t, FSConfig{}), Listen: (&loopbackListen{}).listen})
	if code != 1 || !strings.Contains(stderr, "wget: can't connect to remote host (127.0.0.1): Network is unreachable") {
		t.Errorf("code %d stderr %q", code, stderr)
	}
}

// wget in a container with Spec.NetNS connects from inside that namespace: it reaches a server in
// it, and not the host's loopback.
func TestWgetInNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	netns := loopbackNetNS(t)
	port := freePortIn(t, netns)
	var out syncBuffer
	startProc(t, Spec{Args: []string{"/agnhost", "netexec", fmt.Sprintf("--http-port=%d", port)}, FS: newFS(t, FSConfig{Image: BaseLayer("agnhost")}),
		Hostname: "srv-in-ns", NetNS: netns.Path(), Stdout: &out, Stderr: &out}) // agnhost logs with log.Printf: stderr
	waitFor(t, "netexec started", func() bool { return strings.Contains(out.String(), "Started HTTP server") })
	client := newFS(t, FSConfig{Hostname: "client"})
	stdout, stderr, code := runCmd(t, Spec{Args: []string{"wget", "-qO-", fmt.Sprintf("http://127.0.0.1:%d/hostname", port)}, FS: client, NetNS: netns.Path()})
	if code != 0 || stdout != "srv-in-ns" {
		t.Errorf("wget in the namespace: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	// The host's loopback server is not reachable from the namespace.
	host := wgetServer(t)
	_, stderr, code = runCmd(t, Spec{Args: []string{"wget", "-qO-", "http://" + host + "/hostname"}, FS: client, NetNS: netns.Path()})
	if code != 1 || !strings.Contains(stderr, "Connection refused") {
		t.Errorf("wget from the namespace to the host's loopback: code %d stderr %q", code, stderr)
	}
}
