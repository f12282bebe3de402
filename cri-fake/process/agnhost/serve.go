package agnhost

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// goLogger is the standard library's default logger as a Go program in the image has it
// (log.Printf: "2006/01/02 15:04:05 message" on stderr).
func goLogger(p *kernel.Proc) *log.Logger { return log.New(p.Stderr, "", log.LstdFlags) }

// klog writes klog's text lines ("I1203 07:00:00.123456       1 file.go:76] message") on stderr,
// as the agnhost programs that log through klog print them (klog/v2's default: to stderr,
// header Lmmdd hh:mm:ss.uuuuuu threadid file:line]).
type klog struct {
	mu  sync.Mutex
	w   io.Writer
	pid int
}

func newKlog(p *kernel.Proc) *klog { return &klog{w: p.Stderr, pid: p.Pid()} }

// printf logs at severity (I, W, E, F) with the upstream source position file:line it stands for.
func (k *klog) printf(severity byte, at string, format string, args ...any) {
	now := time.Now()
	msg := fmt.Sprintf(format, args...)
	if len(msg) == 0 || msg[len(msg)-1] != '\n' {
		msg += "\n"
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	fmt.Fprintf(k.w, "%c%02d%02d %02d:%02d:%02d.%06d %7d %s] %s", severity, int(now.Month()), now.Day(),
		now.Hour(), now.Minute(), now.Second(), now.Nanosecond()/1000, k.pid, at, msg)
}

// fatal is log.Fatal: the message, then exit 1.
func fatal(l *log.Logger, format string, args ...any) int {
	l.Output(2, fmt.Sprintf(format, args...))
	return 1
}

// httpServer is a net/http server of the program, listening in the container's network
// namespace.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
}

// listenHTTP binds port for h (TLS with cfg when not nil); the caller serves it.
func listenHTTP(p *kernel.Proc, port int, h http.Handler, cfg *tls.Config) (*httpServer, error) {
	ln, err := p.Listen(port)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	srv := &http.Server{Handler: withBehaviour(p, h), TLSConfig: cfg, ErrorLog: goLogger(p), ReadHeaderTimeout: time.Minute}
	return &httpServer{srv: srv, ln: ln}, nil
}

// serve serves until the server is closed or the process ends.
func (s *httpServer) serve(p *kernel.Proc) error {
	stop := context.AfterFunc(p.Ctx(), func() { s.srv.Close() })
	defer stop()
	return s.srv.Serve(s.ln)
}

// healthPaths answer 503 when the image behaviour says readiness fails (the catalog's
// failReadiness, cri-fake/process README "Image behaviour").
var healthPaths = map[string]bool{"/healthz": true, "/readyz": true, "/ready": true, "/health": true}

func withBehaviour(p *kernel.Proc, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if healthPaths[r.URL.Path] && p.ReadinessFailing() {
			http.Error(w, "readiness failing (image behaviour)", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// listenError is how net/http's ListenAndServe words a failed bind ("listen tcp :8080: bind:
// address already in use").
func listenError(network string, port int, err error) string {
	var errno syscall.Errno
	for e := err; e != nil; {
		if x, ok := e.(syscall.Errno); ok {
			errno = x
			break
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	if errno != 0 {
		return fmt.Sprintf("listen %s :%d: bind: %v", network, port, errno)
	}
	return err.Error()
}

// untilEnd waits for the program's own end (a code on done) or the end of its process (its
// servers close with the process: serve's AfterFunc).
func untilEnd(p *kernel.Proc, done <-chan int) int {
	select {
	case code := <-done:
		return code
	case <-p.Ctx().Done():
		code, _ := kernel.ExitCause(p.Ctx())
		return code
	}
}

// getBody is upstream's dialHTTP (netexec.go, guestbook.go): GET http://hostPort/request with a
// 5 s client; the body, at most 1 MiB of it (a hostile server's endless body stops there).
func getBody(ctx context.Context, p *kernel.Proc, hostPort, request string) (string, error) {
	client, tr := httpClient(p, 5*time.Second, nil)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/%s", hostPort, request), nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	return string(body), nil
}

// waitEnd blocks until the process is ended by a signal it does not handle (a Go program in
// `select {}`) and returns that exit code.
func waitEnd(p *kernel.Proc) int {
	<-p.Ctx().Done()
	code, _ := kernel.ExitCause(p.Ctx())
	return code
}

// loadKeyPair is tls.LoadX509KeyPair reading the container's files.
func loadKeyPair(p *kernel.Proc, certFile, keyFile string) (tls.Certificate, error) {
	cert, err := p.ReadFileBounded(p.Abs(certFile))
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := p.ReadFileBounded(p.Abs(keyFile))
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// httpClient is a Go program's net/http client in the container: it dials from the container's
// network namespace and resolves names with its resolv.conf and hosts.
func httpClient(p *kernel.Proc, timeout time.Duration, tlsConf *tls.Config) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         resolv.DialContext(p),
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
	}
	return &http.Client{Transport: tr, Timeout: timeout}, tr
}

// panicExit is what a Go program's unrecovered panic prints and exits with (2).
func panicExit(p *kernel.Proc, msg string) int {
	fmt.Fprintf(p.Stderr, "panic: %s\n\ngoroutine 1 [running]:\nmain.main()\n\t/go/src/k8s.io/kubernetes/test/images/agnhost/agnhost.go:105 +0x%x\nexit status 2\n", msg, 0x1d)
	return 2
}

// sleepCtx sleeps d or until the process ends (false then).
func sleepCtx(p *kernel.Proc, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.Ctx().Done():
		return false
	}
}

// joinPort is "host:port".
func joinPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
