package agnhost

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// netexecState is what netexec's handlers share (netexec.go's package variables).
type netexecState struct {
	p           *kernel.Proc
	log         *log.Logger
	httpPort    int
	udpPort     int
	serverReady atomic.Bool
	sigterm     chan struct{}
	exit        chan shutdownRequest
}

type shutdownRequest struct {
	code    int
	timeout time.Duration
}

// netexec follows netexec/netexec.go: an HTTP(S) server on --http-port (8080) with its endpoints
// (/, /clientip, /serverport, /header, /dial, /echo, /exit, /healthz, /readyz, /hostname,
// /hostName, /envvar, /redirect, /shell, /upload, /shutdown), each logging its request line
// ("GET /echo?msg=%s&code=%s") through log.Printf, a UDP server on --udp-port (8081; -1: none)
// answering hostname, echo, envvar, clientip and serverport, and TERM ending it with 0 after
// --delay-shutdown seconds. /healthz is 200 once the UDP server runs, 412 before (and always
// without one, as upstream). SCTP (--sctp-port) is not simulated.
func netexec(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	httpPort := fs.Int("http-port", 8080, "HTTP Listen Port")
	certFile := fs.String("tls-cert-file", "", "File containing an x509 certificate for HTTPS. (CA cert, if any, concatenated after server cert)")
	keyFile := fs.String("tls-private-key-file", "", "File containing an x509 private key matching --tls-cert-file")
	udpPort := fs.Int("udp-port", 8081, "UDP Listen Port")
	sctpPort := fs.Int("sctp-port", -1, "SCTP Listen Port")
	override := fs.String("http-override", "", "Override the HTTP handler to always respond as if it were a GET with this path & params")
	udpAddrs := fs.String("udp-listen-addresses", "", "A comma separated list of ip addresses the udp servers listen from")
	delay := fs.Int("delay-shutdown", 0, "Number of seconds to delay shutdown when receiving SIGTERM.")
	return func([]string) int {
		s := &netexecState{p: p, log: goLogger(p), httpPort: *httpPort, udpPort: *udpPort,
			sigterm: make(chan struct{}), exit: make(chan shutdownRequest, 1)}
		done := make(chan int, 1)
		finish := func(code int) {
			select {
			case done <- code:
			default:
			}
		}
		// netexec.go:156-172: TERM closes sigTermReceived, and after the delay the program exits 0.
		var termed atomic.Bool
		p.SetSignalHandler(func(sig syscall.Signal) bool {
			if sig != syscall.SIGTERM {
				return false
			}
			if termed.CompareAndSwap(false, true) {
				close(s.sigterm)
				go func() {
					if *delay > 0 {
						s.log.Printf("Sleeping %d seconds before terminating...", *delay)
						if !sleepCtx(p, time.Duration(*delay)*time.Second) {
							return
						}
					}
					finish(0)
				}()
			}
			return true
		})
		mux := http.NewServeMux()
		s.routes(mux, finish)
		var handler http.Handler = mux
		if *override != "" {
			handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, err := http.NewRequestWithContext(r.Context(), "GET", *override, nil)
				if err != nil {
					http.Error(w, fmt.Sprintf("override request failed: %v", err), http.StatusInternalServerError)
					return
				}
				mux.ServeHTTP(w, req)
			})
		}
		if *udpPort != -1 {
			addrs, err := parseAddresses(*udpAddrs)
			if err != nil {
				return fatal(s.log, "%v", err)
			}
			for _, a := range addrs {
				go s.udpServer(a, finish)
			}
		}
		if *sctpPort != -1 {
			s.log.Printf("SCTP server on port %d: SCTP is not simulated by plugsim", *sctpPort)
		}
		var tlsConf *tls.Config
		if *certFile != "" {
			cert, err := loadKeyPair(p, *certFile, *keyFile)
			if err != nil {
				s.log.Printf("Started HTTP server on port %d", *httpPort)
				return fatal(s.log, "%v", err)
			}
			tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}}
		}
		s.log.Printf("Started HTTP server on port %d", *httpPort)
		srv, err := listenHTTP(p, *httpPort, handler, tlsConf)
		if err != nil {
			return fatal(s.log, "%s", listenError("tcp", *httpPort, err))
		}
		go func() {
			// netexec.go:237-244: /exit with a timeout shuts the server down gracefully.
			select {
			case re := <-s.exit:
				ctx, cancel := context.WithTimeout(context.Background(), re.timeout)
				err := srv.srv.Shutdown(ctx)
				cancel()
				s.log.Printf("Graceful shutdown completed with: %v", err)
				finish(re.code)
			case <-p.Ctx().Done():
			}
		}()
		go srv.serve(p)
		return untilEnd(p, done)
	}
}

// parseAddresses is netexec.go parseAddresses: "" is any address; otherwise a sorted, unique
// list of IPs.
func parseAddresses(addresses string) ([]string, error) {
	if addresses == "" {
		return []string{""}, nil
	}
	set := map[string]bool{}
	for _, a := range strings.Split(addresses, ",") {
		if _, err := netip.ParseAddr(a); err != nil {
			return nil, fmt.Errorf("parseAddress: invalid address %s", a)
		}
		set[a] = true
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

func (s *netexecState) routes(mux *http.ServeMux, finish func(int)) {
	p, l := s.p, s.log
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /")
		fmt.Fprintf(w, "NOW: %v", time.Now())
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /clientip")
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("/serverport", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /serverport")
		fmt.Fprint(w, s.httpPort)
	})
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		key := r.FormValue("key")
		if key != "" {
			l.Printf("GET /header?key=%s", key)
			fmt.Fprintf(w, "%s", r.Header.Get(key))
			return
		}
		l.Printf("GET /header")
		data, err := json.Marshal(r.Header)
		if err != nil {
			fmt.Fprintf(w, "error marshalling header, err: %v", err)
			return
		}
		fmt.Fprintf(w, "%s", string(data))
	})
	mux.HandleFunc("/dial", s.dial)
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		msg := r.FormValue("msg")
		codeString := r.FormValue("code")
		l.Printf("GET /echo?msg=%s&code=%s", msg, codeString)
		if codeString != "" {
			code, err := strconv.Atoi(codeString)
			if err != nil {
				fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
				return
			}
			w.WriteHeader(code)
		}
		fmt.Fprintf(w, "%s", msg)
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) { s.exitHandler(w, r, finish) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /healthz")
		if s.serverReady.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusPreconditionFailed)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /readyz")
		select {
		case <-s.sigterm:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("shutting down"))
		default:
			if s.serverReady.Load() {
				w.Write([]byte("ok"))
				return
			}
			w.WriteHeader(http.StatusPreconditionFailed)
		}
	})
	hostname := func(path string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			l.Printf("GET %s", path)
			fmt.Fprint(w, p.Hostname())
		}
	}
	mux.HandleFunc("/hostname", hostname("/hostname"))
	mux.HandleFunc("/hostName", hostname("/hostName"))
	mux.HandleFunc("/envvar", func(w http.ResponseWriter, r *http.Request) {
		name := r.FormValue("var")
		if name == "" {
			http.Error(w, "'var' query parameter is required", http.StatusBadRequest)
			return
		}
		l.Printf("GET /envvar?var=%s", name)
		val, ok := lookupEnv(p.Env, name)
		if !ok {
			http.Error(w, fmt.Sprintf("env var %q is not set", name), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, val)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		location := r.FormValue("location")
		codeString := r.FormValue("code")
		l.Printf("%s /redirect?msg=%s&code=%s", r.Method, location, codeString)
		code := http.StatusFound
		if codeString != "" {
			var err error
			if code, err = strconv.Atoi(codeString); err != nil {
				fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
				return
			}
		}
		http.Redirect(w, r, location, code)
	})
	mux.HandleFunc("/shell", s.shell)
	mux.HandleFunc("/upload", s.upload)
	mux.HandleFunc("/shutdown", func(w http.ResponseWriter, r *http.Request) {
		l.Printf("GET /shutdown")
		finish(0)
	})
}

func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// exitHandler is netexec.go exitHandler: wait, then exit with code at once (timeout 0) or after
// a graceful shutdown of at most timeout.
func (s *netexecState) exitHandler(w http.ResponseWriter, r *http.Request, finish func(int)) {
	waitString, timeoutString, codeString := r.FormValue("wait"), r.FormValue("timeout"), r.FormValue("code")
	s.log.Printf("GET /exit?code=%s&timeout=%s&wait=%s", codeString, timeoutString, waitString)
	timeout, err := time.ParseDuration(timeoutString)
	if err != nil && timeoutString != "" {
		fmt.Fprintf(w, "argument 'timeout' must be a valid golang duration or empty, got %q\n", timeoutString)
		return
	}
	wait, err := time.ParseDuration(waitString)
	if err != nil && waitString != "" {
		fmt.Fprintf(w, "argument 'wait' must be a valid golang duration or empty, got %q\n", waitString)
		return
	}
	code, err := strconv.Atoi(codeString)
	if err != nil && codeString != "" {
		fmt.Fprintf(w, "argument 'code' must be an integer [0-127] or empty, got %q\n", codeString)
		return
	}
	s.log.Printf("Will begin shutdown in %s, allowing %s for connections to close, then will exit with %d", wait, timeout, code)
	if !sleepCtx(s.p, wait) {
		return
	}
	if timeout == 0 {
		finish(code & 0xff)
		return
	}
	select {
	case s.exit <- shutdownRequest{code: code & 0xff, timeout: timeout}:
	default:
	}
}

// dial is netexec.go dialHandler: tries requests to host:port over http or udp and answers
// {"responses": [...], "errors": [...]}.
func (s *netexecState) dial(w http.ResponseWriter, r *http.Request) {
	values, err := url.Parse(r.URL.RequestURI())
	if err != nil {
		http.Error(w, fmt.Sprintf("%v", err), http.StatusBadRequest)
		return
	}
	q := values.Query()
	host, port, request, protocol, tryParam := q.Get("host"), q.Get("port"), q.Get("request"), q.Get("protocol"), q.Get("tries")
	s.log.Printf("GET /dial?host=%s&protocol=%s&port=%s&request=%s&tries=%s", host, protocol, port, request, tryParam)
	tries := 1
	if len(tryParam) > 0 {
		tries, err = strconv.Atoi(tryParam)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("tries parameter is invalid. %v", err), http.StatusBadRequest)
		return
	}
	if len(request) == 0 {
		http.Error(w, fmt.Sprintf("request parameter not specified. %v", err), http.StatusBadRequest)
		return
	}
	// At most 1,000 tries a request: upstream has no bound, a hostile tries= would hold the
	// server for ever.
	tries = min(tries, 1000)
	hostPort := net.JoinHostPort(host, port)
	var dialer func(ctx context.Context, request, addr string) (string, error)
	switch strings.ToLower(protocol) {
	case "", "http":
		dialer = s.dialHTTP
	case "udp":
		dialer = s.dialUDP
	case "sctp":
		http.Error(w, "sctp is not simulated by plugsim", http.StatusBadRequest)
		return
	default:
		http.Error(w, fmt.Sprintf("unsupported protocol. %s", protocol), http.StatusBadRequest)
		return
	}
	// net.ResolveTCPAddr/ResolveUDPAddr: a name is resolved once, by the container's resolver.
	addr, err := s.resolve(r.Context(), hostPort, strings.ToLower(protocol) == "udp")
	if err != nil {
		http.Error(w, fmt.Sprintf("host and/or port param are invalid. %v", err), http.StatusBadRequest)
		return
	}
	errs := make([]string, 0)
	responses := make([]string, 0)
	var response string
	for range tries {
		response, err = dialer(r.Context(), request, addr)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v", err))
		} else {
			responses = append(responses, response)
		}
	}
	output := map[string][]string{}
	if len(response) > 0 {
		output["responses"] = responses
	}
	if len(errs) > 0 {
		output["errors"] = errs
	}
	data, _ := json.Marshal(output)
	fmt.Fprint(w, string(data))
}

// resolve is net.ResolveTCPAddr/ResolveUDPAddr in the container: host:port with a numeric or
// named host, the name through the container's resolv.conf and hosts.
func (s *netexecState) resolve(ctx context.Context, hostPort string, udp bool) (string, error) {
	network := "tcp"
	if udp {
		network = "udp"
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", &net.AddrError{Err: err.Error(), Addr: hostPort}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		if port == "" {
			n = 0
		} else {
			return "", &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "unknown port", Addr: network + "/" + port}}
		}
	}
	if host == "" {
		return net.JoinHostPort("", strconv.Itoa(n)), nil
	}
	ips, err := resolv.LookupHost(ctx, s.p, host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ips[0].String(), strconv.Itoa(n)), nil
}

// dialHTTP is netexec.go dialHTTP.
func (s *netexecState) dialHTTP(ctx context.Context, request, addr string) (string, error) {
	return getBody(ctx, s.p, addr, request)
}

// dialUDP is netexec.go dialUDP: one datagram out, one in, within 5 s.
func (s *netexecState) dialUDP(ctx context.Context, request, addr string) (string, error) {
	conn, err := s.p.Dial(ctx, "udp", addr)
	if err != nil {
		return "", fmt.Errorf("udp dial failed. err:%v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(request)); err != nil {
		return "", fmt.Errorf("udp connection write failed. err:%v", err)
	}
	buf := make([]byte, 2048)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || n == 0 {
		return "", fmt.Errorf("reading from udp connection failed. err:'%v'", err)
	}
	return string(buf[:n]), nil
}

// maxShellOutput bounds /shell's output, as ExecSync's (kernel.MaxExecSyncOutput): the command
// runs on, and what is past the bound is dropped.
const maxShellOutput = kernel.MaxExecSyncOutput

// shell is netexec.go shellHandler: /bin/sh -c CMD, its combined output and error as JSON.
func (s *netexecState) shell(w http.ResponseWriter, r *http.Request) {
	cmd := r.FormValue("shellCommand")
	if cmd == "" {
		cmd = r.FormValue("cmd")
	}
	s.log.Printf("GET /shell?cmd=%s", cmd)
	p := s.p
	out := &kernel.NewCappedOutput(maxShellOutput).Stdout
	output := map[string]string{}
	exe, err := p.LookPath("/bin/sh", p.Env, p.Dir)
	if err != nil {
		output["error"] = "fork/exec /bin/sh: no such file or directory"
	} else {
		code, err := p.Spawn(exe, []string{"/bin/sh", "-c", cmd}, p.Env, p.Dir, kernel.Stdio{In: strings.NewReader(""), Out: out, Err: out}, false)
		switch {
		case err != nil:
			output["error"] = "fork/exec /bin/sh: resource temporarily unavailable"
		case code > 128:
			output["error"] = "signal: " + syscall.Signal(code-128).String()
		case code != 0:
			output["error"] = fmt.Sprintf("exit status %d", code)
		}
	}
	if b := out.Bytes(); len(b) > 0 {
		output["output"] = string(b)
	}
	s.log.Printf("Output: %s", output)
	data, _ := json.Marshal(output)
	fmt.Fprint(w, string(data))
}

// maxUpload bounds an /upload (the file lands in the container's memory unless /uploads is a
// mount): 32 MiB, Go's default multipart memory.
const maxUpload = 32 << 20

// upload is netexec.go uploadHandler: the "file" form field to /uploads/upload<N>, chmod 0700.
func (s *netexecState) upload(w http.ResponseWriter, r *http.Request) {
	s.log.Printf("GET /upload")
	result := map[string]string{}
	fail := func(msg string, err error) {
		result["error"] = msg
		data, _ := json.Marshal(result)
		fmt.Fprint(w, string(data))
		s.log.Printf("%s: %s", strings.TrimSuffix(msg, "."), err)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
	file, _, err := r.FormFile("file")
	if err != nil {
		fail("Unable to upload file.", err)
		return
	}
	defer file.Close()
	var name string
	var f io.WriteCloser
	for range 10000 {
		var b [4]byte
		rand.Read(b[:])
		name = fmt.Sprintf("/uploads/upload%d", uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
		if _, err := s.p.FS().Lstat(name); errors.Is(err, os.ErrNotExist) {
			f, err = s.p.OpenWrite(name, false, 0o600)
			break
		}
	}
	if f == nil {
		fail("Unable to open file for write", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, file); err != nil {
		fail("Unable to write file.", err)
		return
	}
	if err := s.p.Chmod(name, 0o700); err != nil {
		fail("Unable to chmod file.", err)
		return
	}
	s.log.Printf("Wrote upload to %s", name)
	result["output"] = name
	w.WriteHeader(http.StatusCreated)
	data, _ := json.Marshal(result)
	fmt.Fprint(w, string(data))
}

// udpServer is netexec.go startUDPServer.
func (s *netexecState) udpServer(address string, finish func(int)) {
	pc, err := s.p.ListenPacket(s.udpPort)
	if err != nil {
		s.log.Printf("Error occurred: failed to create listener for UDP address %s:%v", joinPort(address, s.udpPort), err)
		finish(1)
		return
	}
	defer pc.Close()
	stop := context.AfterFunc(s.p.Ctx(), func() { pc.Close() })
	defer stop()
	s.log.Printf("Started UDP server on port %s %d", address, s.udpPort)
	s.serverReady.Store(true)
	defer func() {
		s.log.Printf("UDP server exited")
		s.serverReady.Store(false)
	}()
	buf := make([]byte, 2048)
	for {
		n, client, err := pc.ReadFrom(buf)
		if err != nil {
			if s.p.Ctx().Err() == nil {
				s.log.Printf("Error occurred: failed accepting UDP connections:%v", err)
				finish(1)
			}
			return
		}
		raw := strings.TrimSpace(string(buf[:n]))
		text := strings.ToLower(raw)
		var reply string
		switch {
		case text == "hostname":
			s.log.Println("Sending udp hostName response")
			reply = s.p.Hostname()
		case strings.HasPrefix(text, "envvar "):
			parts := strings.SplitN(raw, " ", 2)
			name := strings.TrimSpace(parts[1])
			reply, _ = lookupEnv(s.p.Env, name)
			s.log.Printf("Sending UDP envvar response for %s", name)
		case strings.HasPrefix(text, "echo "):
			reply = strings.SplitN(text, " ", 2)[1]
			s.log.Printf("Echoing %v to UDP client %s\n", reply, client)
		case text == "clientip":
			reply = client.String()
			s.log.Printf("Sending clientip back to UDP client %s\n", client)
		case text == "serverport":
			reply = strconv.Itoa(s.udpPort)
			s.log.Printf("Sending server port to UDP client %s\n", reply)
		default:
			if len(text) > 0 {
				s.log.Printf("Unknown UDP command received from %s: %v\n", client, text)
			}
			continue
		}
		if _, err := pc.WriteTo([]byte(reply), client); err != nil {
			s.log.Printf("Error occurred: failed to write to UDP client %s:%v", client, err)
			finish(1)
			return
		}
	}
}
