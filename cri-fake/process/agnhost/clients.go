package agnhost

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// guestbook follows guestbook/guestbook.go: an HTTP key-value store on --http-port (80) with
// /register, /get, /set and /guestbook (which forwards set to agnhost-primary and get to
// agnhost-replica on --backend-port, names resolved through the container's resolver); with
// --replicaof it registers with that primary and takes its store.
func guestbook(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	httpPort := fs.String("http-port", "80", "HTTP Listen Port")
	backendPort := fs.String("backend-port", "6379", "Backend's HTTP Listen Port")
	replicaOf := fs.String("replicaof", "", "The host's name to register to")
	return func([]string) int {
		g := &guestbookState{p: p, l: goLogger(p), store: map[string]any{}, backendPort: *backendPort}
		failed := make(chan int, 1)
		go func() {
			if code, ok := g.register(*replicaOf); !ok {
				failed <- code
			}
		}()
		mux := http.NewServeMux()
		mux.HandleFunc("/register", g.registerHandler)
		mux.HandleFunc("/get", g.getHandler)
		mux.HandleFunc("/set", g.setHandler)
		mux.HandleFunc("/guestbook", g.guestbookHandler)
		port, err := strconv.Atoi(*httpPort)
		if err != nil || port < 0 || port > 65535 {
			return fatal(g.l, "listen tcp: address %s: invalid port", *httpPort)
		}
		srv, err := listenHTTP(p, port, mux, nil)
		if err != nil {
			return fatal(g.l, "%s", listenError("tcp", port, err))
		}
		go srv.serve(p)
		return untilEnd(p, failed)
	}
}

type guestbookState struct {
	p           *kernel.Proc
	l           *log.Logger
	backendPort string

	mu       sync.Mutex
	store    map[string]any
	replicas []string
}

// maxGuestbookEntries bounds the store and the replica list (upstream's grow without bound).
const maxGuestbookEntries = 10000

// register is guestbook.go registerNode: up to 15 s of tries, 1 s apart, then log.Fatal.
func (g *guestbookState) register(to string) (int, bool) {
	if to == "" {
		return 0, true
	}
	hostPort := net.JoinHostPort(to, g.backendPort)
	for start := time.Now(); time.Since(start) < 15*time.Second; {
		ip, err := g.localIP(hostPort)
		if err != nil {
			g.l.Printf("unable to get IP %s: %v. Retrying in %s.", hostPort, err, time.Second)
			if !sleepCtx(g.p, time.Second) {
				return 0, true
			}
			continue
		}
		request := fmt.Sprintf("register?host=%s", ip)
		g.l.Printf("Registering to primary: %s/%s", hostPort, request)
		response, err := g.dialHTTP(request, hostPort)
		if err != nil {
			g.l.Printf("encountered error while registering to primary: %v. Retrying in %s.", err, time.Second)
			if !sleepCtx(g.p, time.Second) {
				return 0, true
			}
			continue
		}
		var resp map[string]any
		if err := json.Unmarshal([]byte(response), &resp); err != nil {
			g.l.Printf("Error while unmarshaling primary's response: %v", err)
			return 1, false
		}
		data, ok := resp["data"].(map[string]any)
		if !ok {
			g.l.Printf("Could not cast responseJSON: %s", resp["data"])
			return 1, false
		}
		g.mu.Lock()
		g.store = data
		g.mu.Unlock()
		g.l.Printf("Registered to node: %s", to)
		return 0, true
	}
	g.l.Printf("Timed out while registering to primary.")
	return 1, false
}

// localIP is guestbook.go getIP: the source address of a UDP "connection" to hostPort.
func (g *guestbookState) localIP(hostPort string) (net.IP, error) {
	conn, err := resolv.DialContext(g.p)(g.p.Ctx(), "udp", hostPort)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP, nil
}

func (g *guestbookState) dialHTTP(request, hostPort string) (string, error) {
	return getBody(g.p.Ctx(), g.p, hostPort, request)
}

func (g *guestbookState) query(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	u, err := url.Parse(r.URL.RequestURI())
	if err != nil {
		http.Error(w, fmt.Sprintf("%v", err), http.StatusBadRequest)
		return nil, false
	}
	return u.Query(), true
}

func (g *guestbookState) registerHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := g.query(w, r)
	if !ok {
		return
	}
	ip := q.Get("host")
	g.l.Printf("GET /register?host=%s", ip)
	g.mu.Lock()
	data, err := json.Marshal(map[string]any{"data": g.store})
	if err == nil && len(g.replicas) < maxGuestbookEntries {
		g.replicas = append(g.replicas, ip)
	}
	g.mu.Unlock()
	if err != nil {
		http.Error(w, fmt.Sprintf("response could not be serialized. %v", err), http.StatusExpectationFailed)
		return
	}
	fmt.Fprint(w, string(data))
	g.l.Printf("Node '%s' registered.", ip)
}

func (g *guestbookState) getHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := g.query(w, r)
	if !ok {
		return
	}
	key := q.Get("key")
	g.l.Printf("GET /get?key=%s", key)
	g.mu.Lock()
	out := map[string]any{}
	if key == "" {
		out["data"] = g.store
	} else {
		v, found := g.store[key]
		if !found {
			v = ""
		}
		out["data"] = v
	}
	data, err := json.Marshal(out)
	g.mu.Unlock()
	if err != nil {
		http.Error(w, fmt.Sprintf("response could not be serialized. %v", err), http.StatusExpectationFailed)
		return
	}
	fmt.Fprint(w, string(data))
}

func (g *guestbookState) setHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := g.query(w, r)
	if !ok {
		return
	}
	key, value := q.Get("key"), q.Get("value")
	g.l.Printf("GET /set?key=%s&value=%s", key, value)
	if key == "" {
		http.Error(w, "cannot set with empty key.", http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	if _, ok := g.store[key]; ok || len(g.store) < maxGuestbookEntries {
		g.store[key] = value
	}
	replicas := append([]string(nil), g.replicas...)
	g.mu.Unlock()
	request := fmt.Sprintf("set?key=%s&value=%s", key, value)
	for _, replica := range replicas {
		if _, err := g.dialHTTP(request, net.JoinHostPort(replica, g.backendPort)); err != nil {
			http.Error(w, fmt.Sprintf("encountered error while propagating to replica '%s': %v", replica, err), http.StatusExpectationFailed)
			return
		}
	}
	data, _ := json.Marshal(map[string]string{"message": "Updated"})
	fmt.Fprint(w, string(data))
}

func (g *guestbookState) guestbookHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := g.query(w, r)
	if !ok {
		return
	}
	cmd, key, value := strings.ToLower(q.Get("cmd")), q.Get("key"), q.Get("value")
	g.l.Printf("GET /guestbook?cmd=%s&key=%s&value=%s", cmd, key, value)
	if cmd != "get" && cmd != "set" {
		http.Error(w, fmt.Sprintf("unsupported cmd: '%s'", cmd), http.StatusBadRequest)
		return
	}
	if cmd == "set" && key == "" {
		http.Error(w, "cannot set with empty key.", http.StatusBadRequest)
		return
	}
	host := "agnhost-primary"
	if cmd == "get" {
		host = "agnhost-replica"
	}
	hostPort := net.JoinHostPort(host, g.backendPort)
	if _, err := resolv.LookupHost(r.Context(), g.p, host); err != nil {
		http.Error(w, fmt.Sprintf("host and/or port param are invalid. %v", err), http.StatusBadRequest)
		return
	}
	response, err := g.dialHTTP(fmt.Sprintf("%s?key=%s&value=%s", cmd, key, value), hostPort)
	if err != nil {
		http.Error(w, fmt.Sprintf("encountered error: %v", err), http.StatusExpectationFailed)
		return
	}
	fmt.Fprint(w, response)
}

// mtlsServer follows mtlsserver/server.go: HTTPS on --listen with the key and chain of
// --server-creds (one PEM file), asking for a client certificate; GET /spiffe-echo verifies it
// against --spiffe-trust-bundle and answers "Client Identity: <its one URI SAN>".
func mtlsServer(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	listen := fs.String("listen", "", "<address>:<port> to listen on")
	serverCreds := fs.String("server-creds", "", "Credential bundle with the server key and certificate chain")
	trustBundle := fs.String("spiffe-trust-bundle", "", "Trust bundle for verifying client certificates")
	return func([]string) int {
		if *listen == "" || *serverCreds == "" || *trustBundle == "" {
			fmt.Fprintln(p.Stderr, "Error: missing required flags")
			return 1
		}
		fail := func(err error) int {
			fmt.Fprintf(p.Stderr, "Error: error while serving: %v\n", err)
			return 1
		}
		bundle, err := p.ReadFileBounded(p.Abs(*trustBundle))
		if err != nil {
			return fail(fmt.Errorf("while reading SPIFFE trust anchors: %w", err))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(bundle) {
			return fail(fmt.Errorf("failed to append client certs from PEM"))
		}
		cert, err := loadKeyPair(p, *serverCreds, *serverCreds)
		if err != nil {
			return fail(fmt.Errorf("while loading server key pair: %w", err))
		}
		_, portStr, err := net.SplitHostPort(*listen)
		port, perr := strconv.Atoi(portStr)
		if err != nil || perr != nil {
			return fail(fmt.Errorf("while listening: listen tcp: address %s: missing port in address", *listen))
		}
		l := goLogger(p)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /spiffe-echo", func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
				http.Error(w, "SPIFFE client certificate authentication required", http.StatusUnauthorized)
				return
			}
			leaf := r.TLS.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range r.TLS.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			// server.go:111: the trust bundle is read again for each request (it rotates).
			pemRoots, err := p.ReadFileBounded(p.Abs(*trustBundle))
			if err != nil {
				l.Printf("Error while reading SPIFFE trust anchors: %v", err)
				http.Error(w, "Internal Error", http.StatusInternalServerError)
				return
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(pemRoots)
			chains, err := leaf.Verify(x509.VerifyOptions{Intermediates: inter, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			if err != nil || len(chains) == 0 {
				l.Printf("Error while verifying SPIFFE client certificate: %v", err)
				http.Error(w, "SPIFFE client certificate authentication required", http.StatusUnauthorized)
				return
			}
			if len(leaf.URIs) != 1 {
				l.Printf("SPIFFE client certificate did not have 1 URI SAN, count: %d", len(leaf.URIs))
				http.Error(w, "Malformed SPIFFE certificate", http.StatusUnauthorized)
				return
			}
			w.Write([]byte("Client Identity: " + leaf.URIs[0].String()))
		})
		srv, err := listenHTTP(p, port, mux, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
		if err != nil {
			return fail(fmt.Errorf("while listening: %s", listenError("tcp", port, err)))
		}
		srv.srv.ReadTimeout, srv.srv.WriteTimeout, srv.srv.MaxHeaderBytes = 30*time.Second, 30*time.Second, 1<<20
		srv.serve(p)
		return waitEnd(p)
	}
}

// mtlsClient follows mtlsclient/client.go: every 10 s, GET --fetch-url over TLS with the
// client key and chain of --client-cred-bundle (PKCS#8 key), trusting --server-trust-bundle;
// "Got response body: ..." or a klog error line.
func mtlsClient(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	fetchURL := fs.String("fetch-url", "", "server URL to poll")
	trustBundle := fs.String("server-trust-bundle", "", "File with trust anchors to verify the server certificate")
	credBundle := fs.String("client-cred-bundle", "", "File with client key and certificate chain")
	return func([]string) int {
		if *fetchURL == "" || *trustBundle == "" || *credBundle == "" {
			fmt.Fprintln(p.Stderr, "Error: missing required flags")
			return 1
		}
		if _, err := url.ParseRequestURI(*fetchURL); err != nil {
			fmt.Fprintf(p.Stderr, "Error: invalid --fetch-url: %v\n", err)
			return 1
		}
		k, l := newKlog(p), goLogger(p)
		for {
			if !sleepCtx(p, 10*time.Second) {
				return waitEnd(p)
			}
			body, err := mtlsPoll(p, *fetchURL, *trustBundle, *credBundle)
			if err != nil {
				k.printf('E', "client.go:81", "while sending requests to the server: %v", err)
				continue
			}
			l.Printf("Got response body: %s", body)
		}
	}
}

func mtlsPoll(p *kernel.Proc, fetchURL, trustBundle, credBundle string) (string, error) {
	trust, err := p.ReadFileBounded(p.Abs(trustBundle))
	if err != nil {
		return "", fmt.Errorf("while reading service trust bundle: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(trust)
	bundle, err := p.ReadFileBounded(p.Abs(credBundle))
	if err != nil {
		return "", fmt.Errorf("while reading client credential bundle: %w", err)
	}
	var cert tls.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case "PRIVATE KEY":
			if cert.PrivateKey, err = x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
				return "", fmt.Errorf("while parsing private key from credential bundle: %w", err)
			}
		case "CERTIFICATE":
			cert.Certificate = append(cert.Certificate, block.Bytes)
		}
	}
	if cert.PrivateKey == nil {
		return "", fmt.Errorf("client credential bundle had no private key")
	}
	if len(cert.Certificate) == 0 {
		return "", fmt.Errorf("client credential bundle had no certificates")
	}
	client, tr := httpClient(p, 0, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})
	defer tr.CloseIdleConnections()
	resp, err := client.Get(fetchURL)
	if err != nil {
		return "", fmt.Errorf("while getting URL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return "", fmt.Errorf("non-2xx status %d %q", resp.StatusCode, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("while reading body: %w", err)
	}
	return string(body), nil
}
