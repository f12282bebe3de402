package agnhost

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// serveHostname follows serve-hostname/serve_hostname.go: the host name over HTTP (default),
// raw TCP (--tcp, --http=false) or UDP (--udp) on --port (9376); TERM logs the shutdown and the
// program waits 60 s for the pod's deletion before it exits 0.
func serveHostname(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	doTCP := fs.Bool("tcp", false, "Serve raw over TCP.")
	doUDP := fs.Bool("udp", false, "Serve raw over UDP.")
	doHTTP := fs.Bool("http", true, "Serve HTTP.")
	doClose := fs.Bool("close", false, "Close connection per each HTTP request.")
	port := fs.Int("port", 9376, "Port number.")
	return func([]string) int {
		l := goLogger(p)
		if *doHTTP && (*doTCP || *doUDP) {
			return fatal(l, "Can't server TCP/UDP mode and HTTP mode at the same time")
		}
		hostname := p.Hostname()
		failed := make(chan int, 1)
		fail := func(format string, args ...any) {
			fatal(l, format, args...)
			select {
			case failed <- 1:
			default:
			}
		}
		// The signal handler first: serve_hostname.go:106 registers for TERM before waiting.
		term := make(chan struct{}, 1)
		p.SetSignalHandler(func(sig syscall.Signal) bool {
			if sig != syscall.SIGTERM {
				return false
			}
			select {
			case term <- struct{}{}:
			default:
			}
			return true
		})
		if *doTCP {
			ln, err := p.Listen(*port)
			if err != nil {
				return fatal(l, "Error from net.Listen(): %s", err)
			}
			stop := context.AfterFunc(p.Ctx(), func() { ln.Close() })
			defer stop()
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						if p.Ctx().Err() == nil {
							fail("Error from Accept(): %s", err)
						}
						return
					}
					l.Printf("TCP request from %s", conn.RemoteAddr().String())
					conn.Write([]byte(hostname))
					conn.Close()
				}
			}()
		}
		if *doUDP {
			pc, err := p.ListenPacket(*port)
			if err != nil {
				return fatal(l, "Error from ListenUDP(): %s", err)
			}
			stop := context.AfterFunc(p.Ctx(), func() { pc.Close() })
			defer stop()
			go func() {
				var buf [16]byte
				for {
					_, cli, err := pc.ReadFrom(buf[:])
					if err != nil {
						if p.Ctx().Err() == nil {
							fail("Error from ReadFrom(): %s", err)
						}
						return
					}
					l.Printf("UDP request from %s", cli.String())
					pc.WriteTo([]byte(hostname), cli)
				}
			}()
		}
		if *doHTTP {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				l.Printf("HTTP request from %s", r.RemoteAddr)
				if *doClose {
					w.Header().Add("Connection", "close")
				}
				fmt.Fprintf(w, "%s", hostname)
			})
			srv, err := listenHTTP(p, *port, h, nil)
			if err != nil {
				l.Printf("Serving on port %d.\n", *port)
				return fatal(l, "%s", listenError("tcp", *port, err))
			}
			go srv.serve(p)
		}
		l.Printf("Serving on port %d.\n", *port)
		select {
		case <-term:
		case code := <-failed:
			return code
		case <-p.Ctx().Done():
			code, _ := kernel.ExitCause(p.Ctx())
			return code
		}
		l.Printf("Shutting down after receiving signal: %s.\n", syscall.SIGTERM)
		l.Printf("Awaiting pod deletion.\n")
		if !sleepCtx(p, 60*time.Second) {
			code, _ := kernel.ExitCause(p.Ctx())
			return code
		}
		return 0
	}
}

// liveness follows liveness/server.go: on :8080, /healthz answers 200 "ok" for 10 s and then
// 500 "error: SECONDS"; /started the time since start; /redirect?loc= a 302.
func liveness(p *kernel.Proc, _ *pflag.FlagSet) func([]string) int {
	return func([]string) int {
		started := time.Now()
		mux := http.NewServeMux()
		mux.HandleFunc("/started", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.Write([]byte(time.Since(started).String()))
		})
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			d := time.Since(started)
			if d.Seconds() > 10 {
				w.WriteHeader(500)
				w.Write([]byte(fmt.Sprintf("error: %v", d.Seconds())))
				return
			}
			w.WriteHeader(200)
			w.Write([]byte("ok"))
		})
		mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
			loc, err := url.QueryUnescape(r.URL.Query().Get("loc"))
			if err != nil {
				http.Error(w, fmt.Sprintf("invalid redirect: %q", r.URL.Query().Get("loc")), http.StatusBadRequest)
				return
			}
			http.Redirect(w, r, loc, http.StatusFound)
		})
		srv, err := listenHTTP(p, 8080, mux, nil)
		if err != nil {
			return fatal(goLogger(p), "%s", listenError("tcp", 8080, err))
		}
		srv.serve(p)
		return waitEnd(p)
	}
}

// porter follows porter/porter.go: for each SERVE_PORT_N / SERVE_TCP_PORT_N the value over HTTP
// on port N, SERVE_TLS_PORT_N over HTTPS (CERT_FILE and KEY_FILE, default the image's
// localhost.crt and localhost.key), SERVE_UDP_PORT_N as a datagram reply; --json-response wraps it
// as {"Method":..., "Body":...}. SERVE_SCTP_PORT_N is not simulated.
func porter(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	jsonResponse := fs.Bool("json-response", false, "Responds to requests with a json response that includes the default value with the http.Request Method")
	return func([]string) int {
		l := goLogger(p)
		handler := func(value string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body := value
				if *jsonResponse {
					j, _ := json.Marshal(&struct{ Method, Body string }{r.Method, value})
					w.Header().Set("Content-Type", "application/json")
					body = string(j)
				}
				fmt.Fprint(w, body)
			})
		}
		failed := make(chan int, 1)
		for _, kv := range p.Env {
			key, value, _ := strings.Cut(kv, "=")
			switch {
			case strings.HasPrefix(key, "SERVE_PORT_"), strings.HasPrefix(key, "SERVE_TCP_PORT_"):
				port := strings.TrimPrefix(strings.TrimPrefix(key, "SERVE_PORT_"), "SERVE_TCP_PORT_")
				go porterHTTP(p, l, port, handler(value), nil)
			case strings.HasPrefix(key, "SERVE_TLS_PORT_"):
				port := strings.TrimPrefix(key, "SERVE_TLS_PORT_")
				certFile, keyFile := p.Getenv("CERT_FILE"), p.Getenv("KEY_FILE")
				if certFile == "" {
					certFile = "localhost.crt"
				}
				if keyFile == "" {
					keyFile = "localhost.key"
				}
				cert, err := loadKeyPair(p, certFile, keyFile)
				if err != nil {
					l.Printf("tls server on port %q with certFile=%q, keyFile=%q failed: %v", port, certFile, keyFile, err)
					continue
				}
				go porterHTTP(p, l, port, handler(value), &tls.Config{Certificates: []tls.Certificate{cert}})
			case strings.HasPrefix(key, "SERVE_UDP_PORT_"):
				go porterUDP(p, l, strings.TrimPrefix(key, "SERVE_UDP_PORT_"), value, failed)
			case strings.HasPrefix(key, "SERVE_SCTP_PORT_"):
				l.Printf("SCTP server on port %s: SCTP is not simulated by plugsim", strings.TrimPrefix(key, "SERVE_SCTP_PORT_"))
			}
		}
		return untilEnd(p, failed)
	}
}

func porterHTTP(p *kernel.Proc, l *log.Logger, port string, h http.Handler, cfg *tls.Config) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		l.Printf("server on port %q failed: listen tcp: address 0.0.0.0:%s: invalid port", port, port)
		return
	}
	srv, err := listenHTTP(p, n, h, cfg)
	if err != nil {
		l.Printf("server on port %q failed: %s", port, strings.Replace(listenError("tcp", n, err), ":"+port, "0.0.0.0:"+port, 1))
		return
	}
	if err := srv.serve(p); err != nil && p.Ctx().Err() == nil {
		l.Printf("server on port %q failed: %v", port, err)
	}
}

// porterUDP is porter.go serveUDPPort: each datagram (16 bytes read) is answered with value.
func porterUDP(p *kernel.Proc, l *log.Logger, port, value string, failed chan<- int) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		failed <- fatal(l, "UDP: failed to resolve address: address %s: invalid port", port)
		return
	}
	pc, err := p.ListenPacket(n)
	if err != nil {
		failed <- fatal(l, "UDP: failed to listen on port %s: %v", port, err)
		return
	}
	stop := context.AfterFunc(p.Ctx(), func() { pc.Close() })
	defer stop()
	defer pc.Close()
	l.Printf("Started UDP server on port %s", port)
	buf := make([]byte, 16)
	for {
		_, cli, err := pc.ReadFrom(buf)
		if err != nil {
			if p.Ctx().Err() == nil {
				l.Printf("UDP: error from ReadFrom(): %v", err)
			}
			return
		}
		if _, err := pc.WriteTo([]byte(value), cli); err != nil {
			l.Printf("UDP: error from WriteTo(): %v", err)
		}
	}
}

// grpcHealthChecking follows grpc-health-checking/grpc-health-checking.go: the gRPC health
// service on --port (5000) answering SERVING for --service until --delay-unhealthy-sec (never by
// default), NOT_FOUND for another service name, and /make-serving, /make-not-serving on
// --http-port (8080); TLS with --tls-cert-file and --tls-private-key-file.
func grpcHealthChecking(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	port := fs.Int("port", 5000, "Port number.")
	httpPort := fs.Int("http-port", 8080, "Port number for the /make-serving and /make-not-serving.")
	delay := fs.Int("delay-unhealthy-sec", -1, "Number of seconds to delay before start reporting NOT_SERVING, negative value indicates never.")
	service := fs.String("service", "", "Service name to register the health check for.")
	certFile := fs.String("tls-cert-file", "", "File containing an x509 certificate for gRPC TLS. (CA cert, if any, concatenated after server cert).")
	keyFile := fs.String("tls-private-key-file", "", "File containing an x509 private key matching --tls-cert-file.")
	return func([]string) int {
		l := goLogger(p)
		started := time.Now()
		if (*certFile == "") != (*keyFile == "") {
			return fatal(l, "Both --tls-cert-file and --tls-private-key-file must be set")
		}
		hc := &healthChecker{l: l, started: started, service: *service, delay: *delay}
		mux := http.NewServeMux()
		mark := func(unhealthy bool, msg string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				l.Printf("%s", msg)
				hc.forced.Store(int32(map[bool]int{false: 1, true: 2}[unhealthy]))
				w.WriteHeader(200)
				w.Write([]byte(time.Since(started).String()))
			}
		}
		mux.HandleFunc("/make-not-serving", mark(true, "Mark as unhealthy"))
		mux.HandleFunc("/make-serving", mark(false, "Mark as healthy"))
		failed := make(chan int, 1)
		go func() {
			l.Printf("Http server starting to listen on :%d", *httpPort)
			srv, err := listenHTTP(p, *httpPort, mux, nil)
			if err != nil {
				failed <- fatal(l, "%s", listenError("tcp", *httpPort, err))
				return
			}
			srv.serve(p)
		}()
		ln, err := p.Listen(*port)
		if err != nil {
			return fatal(l, "Error while starting the listening service %v", err)
		}
		var opts []grpc.ServerOption
		if *certFile != "" {
			cert, err := loadKeyPair(p, *certFile, *keyFile)
			if err != nil {
				ln.Close()
				return fatal(l, "Failed to generate credentials %v", err)
			}
			opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
		}
		gs := grpc.NewServer(opts...)
		healthpb.RegisterHealthServer(gs, hc)
		stop := context.AfterFunc(p.Ctx(), gs.Stop)
		defer stop()
		l.Printf("gRPC server starting to listen on :%d", *port)
		go gs.Serve(ln)
		select {
		case code := <-failed:
			gs.Stop()
			return code
		case <-p.Ctx().Done():
			code, _ := kernel.ExitCause(p.Ctx())
			return code
		}
	}
}

// healthChecker is grpc-health-checking.go HealthChecker.
type healthChecker struct {
	healthpb.UnimplementedHealthServer
	l       *log.Logger
	started time.Time
	service string
	delay   int
	forced  atomic.Int32 // 0: not forced, 1: serving, 2: not serving
}

func (h *healthChecker) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.l.Printf("Serving the Check request for health check, started at %v", h.started)
	if req.Service != h.service {
		return nil, status.Errorf(codes.NotFound, "unknown service")
	}
	d := time.Since(h.started)
	if h.forced.Load() == 2 || (h.delay >= 0 && d.Seconds() >= float64(h.delay)) {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *healthChecker) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return nil, status.Error(codes.Unimplemented, "unimplemented")
}

func (h *healthChecker) Watch(*healthpb.HealthCheckRequest, grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return status.Error(codes.Unimplemented, "unimplemented")
}

// nettest follows nettest/nettest.go's server: /read (the state as indented JSON), /write
// (a {"Source": ...} post counted in Received, answered with the host name), /status
// (pass/running/fail) and /quit. Its peer discovery (asking the API server for the endpoints of
// --service and posting to each) is not simulated: the state stays "running" for the 5 minutes
// upstream would try, then "fail".
func nettest(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	port := fs.Int("port", 8080, "Port number to serve at.")
	peers := fs.Int("peers", 8, "Must find at least this many peers for the test to pass.")
	service := fs.String("service", "nettest", "Service to find other network test pods in.")
	namespace := fs.String("namespace", "default", "Namespace of this pod. TODO: kubernetes should make this discoverable.")
	delay := fs.Int("delay-shutdown", 0, "Number of seconds to delay shutdown when receiving SIGTERM.")
	return func([]string) int {
		l := goLogger(p)
		if *service == "" {
			return fatal(l, "Must provide -service flag.")
		}
		done := make(chan int, 1)
		finish := func(code int) {
			select {
			case done <- code:
			default:
			}
		}
		if *delay > 0 {
			p.SetSignalHandler(func(sig syscall.Signal) bool {
				if sig != syscall.SIGTERM {
					return false
				}
				go func() {
					l.Printf("Sleeping %d seconds before exit ...", *delay)
					if sleepCtx(p, time.Duration(*delay)*time.Second) {
						finish(0)
					}
				}()
				return true
			})
		}
		st := &nettestState{Hostname: p.Hostname(), StillContactingPeers: true}
		go func() {
			timeout := max(5*time.Minute, time.Duration(*peers)*time.Second)
			st.logf("Peer discovery of %s/%s is not simulated by plugsim", *namespace, *service)
			if sleepCtx(p, timeout) {
				st.mu.Lock()
				st.StillContactingPeers = false
				st.mu.Unlock()
			}
		}()
		mux := http.NewServeMux()
		mux.HandleFunc("/quit", func(w http.ResponseWriter, r *http.Request) { finish(0) })
		mux.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
			st.mu.Lock()
			defer st.mu.Unlock()
			w.WriteHeader(http.StatusOK)
			b, err := json.MarshalIndent(st, "", "\t")
			st.appendErr(err)
			_, err = w.Write(b)
			st.appendErr(err)
		})
		mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
			defer r.Body.Close()
			st.mu.Lock()
			defer st.mu.Unlock()
			w.WriteHeader(http.StatusOK)
			var wp struct{ Source, Dest string }
			st.appendErr(json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&wp))
			if wp.Source == "" {
				st.appendErr(fmt.Errorf("%v: Got request with no source", st.Hostname))
			} else {
				if st.Received == nil {
					st.Received = map[string]int{}
				}
				if len(st.Received) < maxNettestPeers || st.Received[wp.Source] > 0 {
					st.Received[wp.Source]++
				}
			}
			st.appendErr(json.NewEncoder(w).Encode(&struct{ Hostname string }{st.Hostname}))
		})
		mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.Sent) >= *peers && len(st.Received) >= *peers {
				fmt.Fprintf(w, "pass")
				return
			}
			if st.StillContactingPeers {
				fmt.Fprintf(w, "running")
				return
			}
			go st.logf("Declaring failure for %s/%s with %d sent and %d received and %d peers", *namespace, *service, len(st.Sent), len(st.Received), *peers)
			fmt.Fprintf(w, "fail")
		})
		srv, err := listenHTTP(p, *port, mux, nil)
		if err != nil {
			return fatal(l, "%s", listenError("tcp", *port, err))
		}
		go srv.serve(p)
		return untilEnd(p, done)
	}
}

// maxNettestPeers bounds the sources /write remembers (upstream keeps every one).
const maxNettestPeers = 4096

// nettestState is nettest.go State, whose exported fields /read shows.
type nettestState struct {
	Hostname             string
	Sent                 map[string]int
	Received             map[string]int
	Errors               []string
	Log                  []string
	StillContactingPeers bool

	mu sync.Mutex
}

func (s *nettestState) appendErr(err error) {
	if err != nil && len(s.Errors) < 500 {
		s.Errors = append(s.Errors, err.Error())
	}
}

func (s *nettestState) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Log = append(s.Log, fmt.Sprintf(format, args...))
	if len(s.Log) > 500 {
		s.Log = s.Log[1:]
	}
}
