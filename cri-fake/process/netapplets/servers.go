package netapplets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// healthPaths answer 503 when the image behaviour says readiness fails.
var healthPaths = map[string]bool{"/healthz": true, "/readyz": true, "/ready": true, "/health": true}

// statusRecorder remembers the status and size of a response for access logs.
type statusRecorder struct {
	http.ResponseWriter
	status int
	size   int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = 200
	}
	n, err := s.ResponseWriter.Write(b)
	s.size += n
	return n, err
}

// server runs HTTP handlers on ports until the process is stopped: TERM, INT
// and QUIT shut it down cleanly (exit 0), KILL ends it at once.
type server struct {
	p       *kernel.Proc
	handler http.Handler
	ports   []int
	// logLine formats an access log line (nil: no access log).
	logLine func(r *http.Request, status, size int) string
	// bindError formats the message printed when a port cannot be bound.
	bindError func(port int, err error) string
	// announce prints the program's start-up banner (nil: none). It runs once the ports are
	// bound, so a client that waits for the banner finds them listening; when a bind fails it
	// runs before the error, the order the real program prints them in.
	announce func()
}

func (s *server) announced() {
	if s.announce != nil {
		s.announce()
	}
}

func (s *server) run() int {
	p := s.p
	var listeners []net.Listener
	for _, port := range s.ports {
		l, err := p.Listen(port)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			s.announced()
			fmt.Fprintln(p.Stderr, s.bindError(port, err))
			return 1
		}
		listeners = append(listeners, l)
	}
	s.announced()
	var logMu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		if healthPaths[r.URL.Path] && p.ReadinessFailing() {
			http.Error(rec, "readiness failing (image behaviour)", http.StatusServiceUnavailable)
		} else {
			s.handler.ServeHTTP(rec, r)
		}
		if s.logLine != nil {
			logMu.Lock()
			fmt.Fprintln(p.Stdout, s.logLine(r, rec.status, rec.size))
			logMu.Unlock()
		}
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan struct{}, 1)
	p.SetSignalHandler(func(sig syscall.Signal) bool {
		switch sig {
		case syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGWINCH:
			select {
			case stop <- struct{}{}:
			default:
			}
			return true
		case syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2:
			return true // reload / reopen logs: nothing to do
		}
		return false
	})
	for _, l := range listeners {
		go srv.Serve(l)
	}
	select {
	case <-stop:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(ctx)
		cancel()
		return 0
	case <-p.Ctx().Done():
		srv.Close()
		code, _ := kernel.ExitCause(p.Ctx())
		return code
	}
}

func clientAddr(p *kernel.Proc, r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// staticFiles serves files of the container's file system under root.
func staticFiles(p *kernel.Proc, root, serverHeader string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", serverHeader)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "405 Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		fpath := root + "/" + strings.TrimPrefix(r.URL.Path, "/")
		if st, err := p.FS().Stat(fpath); err == nil && st.IsDir() {
			fpath = strings.TrimSuffix(fpath, "/") + "/index.html"
		}
		data, err := p.FS().ReadFile(fpath)
		if err != nil {
			http.Error(w, "404 Not Found", http.StatusNotFound)
			return
		}
		if strings.HasSuffix(fpath, ".html") {
			w.Header().Set("Content-Type", "text/html")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if r.Method == http.MethodHead {
			return
		}
		w.Write(data)
	})
}

var listenRe = regexp.MustCompile(`(?mi)^\s*listen\s+(?:[\d.]+:)?(\d+)`)

// configPorts reads `listen N` / `Listen N` from config files, or def.
func configPorts(p *kernel.Proc, files []string, def int) []int {
	var ports []int
	seen := map[int]bool{}
	for _, f := range files {
		data, err := p.FS().ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range listenRe.FindAllStringSubmatch(string(data), -1) {
			n, _ := strconv.Atoi(m[1])
			if n > 0 && !seen[n] {
				seen[n] = true
				ports = append(ports, n)
			}
		}
	}
	if len(ports) == 0 {
		ports = []int{def}
	}
	return ports
}

var rootRe = regexp.MustCompile(`(?m)^\s*root\s+([^;\s]+)`)

// Nginx serves the static site of an nginx image on the ports of its
// config (default 80), writes /var/run/nginx.pid and logs requests in the
// combined format on stdout.
func Nginx(p *kernel.Proc) int {
	for _, a := range p.Args[1:] {
		if a == "-v" || a == "-V" {
			fmt.Fprintf(p.Stderr, "nginx version: nginx/%s\n", nginxVersion(p))
			return 0
		}
		if a == "-t" {
			fmt.Fprintln(p.Stderr, "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok")
			return 0
		}
	}
	confs := []string{"/etc/nginx/nginx.conf", "/etc/nginx/conf.d/default.conf"}
	root := "/usr/share/nginx/html"
	for _, f := range confs {
		if data, err := p.FS().ReadFile(f); err == nil {
			if m := rootRe.FindStringSubmatch(string(data)); m != nil {
				root = m[1]
			}
		}
	}
	pidFile := "/var/run/nginx.pid"
	if err := p.WriteFile(pidFile, []byte(strconv.Itoa(p.Pid())+"\n"), 0o644); err != nil {
		fmt.Fprintf(p.Stderr, "nginx: [emerg] open() \"%s\" failed (%d: %s)\n", pidFile, errnoOf(err), vfs.Strerror(err))
		return 1
	}
	p.SetArgv([]string{"nginx: master process " + strings.Join(p.Args, " ")})
	if end, err := p.AddWorker([]string{"nginx: worker process"}, kernel.Identity{UID: 101, GID: 101}, "nginx"); err == nil {
		defer end()
	}
	s := &server{
		p:       p,
		handler: staticFiles(p, root, "nginx/"+nginxVersion(p)),
		ports:   configPorts(p, confs, 80),
		logLine: func(r *http.Request, status, size int) string {
			return fmt.Sprintf("%s - - [%s] \"%s %s %s\" %d %d \"%s\" \"%s\" \"-\"", clientAddr(p, r), time.Now().Format("02/Jan/2006:15:04:05 -0700"),
				r.Method, r.URL.RequestURI(), r.Proto, status, size, orDash(r.Referer()), orDash(r.UserAgent()))
		},
		bindError: func(port int, err error) string {
			return fmt.Sprintf("nginx: [emerg] bind() to 0.0.0.0:%d failed (%d: %s)", port, errnoOf(err), vfs.Strerror(err))
		},
	}
	code := s.run()
	_ = p.Remove(pidFile, false)
	return code
}

func nginxVersion(p *kernel.Proc) string {
	if v := p.Getenv("NGINX_VERSION"); v != "" {
		return v
	}
	return "1.14.2"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func errnoOf(err error) int {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return int(errno)
	}
	return 0
}

// Httpd serves the htdocs of an httpd image on its Listen ports (default 80).
func Httpd(p *kernel.Proc) int {
	conf := "/usr/local/apache2/conf/httpd.conf"
	fmt.Fprintf(p.Stderr, "AH00558: httpd: Could not reliably determine the server's fully qualified domain name, using %s. Set the 'ServerName' directive globally to suppress this message\n", p.Hostname())
	s := &server{
		p:       p,
		handler: staticFiles(p, "/usr/local/apache2/htdocs", "Apache/2.4.39 (Unix)"),
		ports:   configPorts(p, []string{conf}, 80),
		logLine: func(r *http.Request, status, size int) string {
			return fmt.Sprintf("%s - - [%s] \"%s %s %s\" %d %d", clientAddr(p, r), time.Now().Format("02/Jan/2006:15:04:05 -0700"), r.Method, r.URL.RequestURI(), r.Proto, status, size)
		},
		bindError: func(port int, err error) string {
			return fmt.Sprintf("(%d)%s: AH00072: make_sock: could not bind to address [::]:%d\nno listening sockets available, shutting down", errnoOf(err), vfs.Strerror(err), port)
		},
		announce: func() {
			fmt.Fprintf(p.Stderr, "[%s] [mpm_event:notice] [pid %d:tid 1] AH00489: Apache/2.4.39 (Unix) configured -- resuming normal operations\n", time.Now().Format("Mon Jan 02 15:04:05.000000 2006"), p.Pid())
		},
	}
	code := s.run()
	if code == 0 {
		fmt.Fprintf(p.Stderr, "[%s] [mpm_event:notice] [pid %d:tid 1] AH00491: caught SIGTERM, shutting down\n", time.Now().Format("Mon Jan 02 15:04:05.000000 2006"), p.Pid())
	}
	return code
}
