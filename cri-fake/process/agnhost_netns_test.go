package process

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// startInNet starts an agnhost program in the cluster namespace (it listens on the pod IP) with
// files written into its view first.
func (c *clusterNet) startInNet(t *testing.T, args, env []string, files map[string]string) (*Process, *syncBuffer) {
	t.Helper()
	fsys := agnhostFS(t, FSConfig{Hostname: "srv-1", IPs: []string{podIP}, DNS: &DNSConfig{
		Servers: []string{clusterDNSIP}, Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}}})
	for p, content := range files {
		if err := fsys.MkdirAll(path.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out syncBuffer
	p := startProc(t, Spec{Args: append([]string{"/agnhost"}, args...), Env: env, FS: fsys, Hostname: "srv-1", NetNS: c.ns.Path(), Stdout: &out, Stderr: &out})
	return p, &out
}

// TestAgnhostInNetNS runs agnhost's servers in a pod's network namespace and reaches them on the
// pod IP with the clients the specs use (test/e2e/framework/network/utils.go:307,490-502,
// framework/service/jig.go:870-895): netexec's /dial over HTTP and UDP and its UDP server,
// serve-hostname's raw TCP and UDP, porter's UDP, guestbook through the cluster's DNS.
func TestAgnhostInNetNS(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	_, netexecOut := c.startInNet(t, []string{"netexec", "--http-port=8083", "--udp-port=8084"}, nil, nil)
	c.startInNet(t, []string{"serve-hostname", "--http=false", "--tcp", "--udp", "--port=9377"}, nil, nil)
	c.startInNet(t, []string{"porter"}, []string{"SERVE_UDP_PORT_9090=udp foo"}, nil)
	c.startInNet(t, []string{"guestbook", "--http-port=8085", "--backend-port=6379"}, nil, nil)
	c.startInNet(t, []string{"guestbook", "--http-port=6379"}, nil, nil)
	waitFor(t, "netexec's UDP server", func() bool { return strings.Contains(netexecOut.String(), "Started UDP server on port  8084") })
	tests := []struct {
		name, script string
		want         string // regexp over stdout
	}{
		{"dial http", `curl -g -q -s 'http://10.244.1.5:8083/dial?request=hostname&protocol=http&host=10.244.1.5&port=8083&tries=1'`, `^\{"responses":\["srv-1"\]\}$`},
		{"dial udp", `curl -g -q -s 'http://10.244.1.5:8083/dial?request=hostname&protocol=udp&host=10.244.1.5&port=8084&tries=2'`, `^\{"responses":\["srv-1","srv-1"\]\}$`},
		{"dial udp echo", `curl -g -q -s 'http://10.244.1.5:8083/dial?request=echo%20hello&protocol=udp&host=web&port=8084&tries=1'`, `^\{"responses":\["hello"\]\}$`},
		{"dial nothing", `curl -g -q -s 'http://10.244.1.5:8083/dial?request=hostname&protocol=udp&host=10.244.1.5&port=1&tries=1'`, `^\{"errors":\["reading from udp connection failed\. err:'read udp .*: connection refused'"\]\}$`},
		{"dial a name", `curl -g -q -s 'http://10.244.1.5:8083/dial?request=hostName&protocol=http&host=web.ns1.svc.cluster.local&port=8083&tries=1'`, `^\{"responses":\["srv-1"\]\}$`},
		// The UDP clients end on nc's -w (no UDP peer closes): one shell runs them at once, so
		// the test waits one -w, long enough for a loaded machine's slow reply.
		{"udp servers", `echo hostName | nc -w 10 -u 10.244.1.5 8084 >/tmp/1 & echo 'envvar NODE_NAME' | nc -w 10 -u 10.244.1.5 8084 >/tmp/2 &
			echo hostName | nc -v -u -w 10 10.244.1.5 9377 >/tmp/3 2>/dev/null & echo x | nc -u -w 10 10.244.1.5 9090 >/tmp/4 & wait
			for f in 1 2 3 4; do echo "[$(cat /tmp/$f)]"; done`, `^\[srv-1\]\n\[\]\n\[srv-1\]\n\[udp foo\]\n$`},
		{"raw tcp to the http port", `echo hostName | nc -v -t -w 10 10.244.1.5 8083`, `^HTTP/1\.1 400 Bad Request\r\n`},
		{"serve-hostname tcp", `echo hostName | nc -v -t -w 10 10.244.1.5 9377`, `^srv-1$`},
	}
	t.Run("clients", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				out, errOut, code := c.run(t, "agnhost", tc.script)
				if code != 0 || !regexp.MustCompile(tc.want).MatchString(out) {
					t.Errorf("%s\ncode %d stdout %q (want %q) stderr %q", tc.script, code, out, tc.want, errOut)
				}
			})
		}
	})
	// guestbook.go:239-270: set reaches agnhost-primary, then get agnhost-replica (in order).
	for _, tc := range []struct{ script, want string }{
		{`curl -s 'http://10.244.1.5:8085/guestbook?cmd=set&key=messages&value=hi'`, `^\{"message":"Updated"\}$`},
		{`curl -s 'http://10.244.1.5:8085/guestbook?cmd=get&key=messages'`, `^\{"data":"hi"\}$`},
	} {
		out, errOut, code := c.run(t, "agnhost", tc.script)
		if code != 0 || !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("%s\ncode %d stdout %q (want %q) stderr %q", tc.script, code, out, tc.want, errOut)
		}
	}
	// netexec.go:448: each /dial logs its request line.
	if !regexp.MustCompile(`GET /dial\?host=10\.244\.1\.5&protocol=udp&port=8084&request=hostname&tries=2\n`).MatchString(netexecOut.String()) {
		t.Errorf("netexec's log has no /dial line: %q", netexecOut.String())
	}
}

// testPKI is a CA and certificates made for a test.
type testPKI struct {
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	caPEM string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &testPKI{ca: ca, caKey: key, caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue makes a leaf certificate: PEM key (PKCS#8) and certificate.
func (k *testPKI) issue(t *testing.T, dns []string, ips []net.IP, uri string) (keyPEM, certPEM string, cert tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: dns, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if uri != "" {
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, k.ca, &key.PublicKey, k.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}))
	certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	cert, err = tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return keyPEM, certPEM, cert
}

// TestAgnhostMTLS: mtlsclient (client.go) polls mtlsserver (server.go) by its DNS name with the
// pod certificate bundle, and the server echoes the client's SPIFFE identity
// (test/e2e/auth/projected_podcertificate.go).
func TestAgnhostMTLS(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	pki := newTestPKI(t)
	serverKey, serverCert, _ := pki.issue(t, []string{"mtls.ns1.svc.cluster.local"}, nil, "")
	clientKey, clientCert, _ := pki.issue(t, nil, nil, "spiffe://cluster.local/ns/ns1/sa/default")
	files := map[string]string{
		"/var/run/server/creds.pem": serverKey + serverCert,
		"/var/run/client/creds.pem": clientKey + clientCert,
		"/var/run/trust/bundle.pem": pki.caPEM,
	}
	c.startInNet(t, []string{"mtlsserver", "--listen=0.0.0.0:8443", "--server-creds=/var/run/server/creds.pem", "--spiffe-trust-bundle=/var/run/trust/bundle.pem"}, nil, files)
	_, clientOut := c.startInNet(t, []string{"mtlsclient", "--fetch-url=https://mtls.ns1.svc.cluster.local:8443/spiffe-echo",
		"--server-trust-bundle=/var/run/trust/bundle.pem", "--client-cred-bundle=/var/run/client/creds.pem"}, nil, files)
	waitFor(t, "the client's first poll (10 s in)", func() bool {
		return strings.Contains(clientOut.String(), "Got response body: Client Identity: spiffe://cluster.local/ns/ns1/sa/default\n")
	})
	// Without a client certificate the server refuses (server.go:88).
	out, _, _ := c.run(t, "agnhost", "curl -s -k https://10.244.1.5:8443/spiffe-echo")
	if out != "SPIFFE client certificate authentication required\n" {
		t.Errorf("without a client certificate: %q", out)
	}
}

// TestAgnhostIssuerDiscovery: test-service-account-issuer-discovery (openidmetadata.go) fetches
// the issuer's discovery document and JWKS from the API server with the pod's in-cluster
// credentials and verifies the projected token (test/e2e/auth/service_accounts.go:700-790).
func TestAgnhostIssuerDiscovery(t *testing.T) {
	t.Parallel() // each in a namespace of its own
	c := newClusterNet(t)
	pki := newTestPKI(t)
	_, _, apiCert := pki.issue(t, []string{"kubernetes.default.svc.cluster.local"}, []net.IP{net.ParseIP(apiServerIP)}, "")
	signer, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const issuer = "https://kubernetes.default.svc.cluster.local"
	const saToken = "sa-token"
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := fmt.Sprintf(`{"keys":[{"use":"sig","kty":"EC","kid":"k1","crv":"P-256","alg":"ES256","x":%q,"y":%q}]}`,
		b64(signer.X.FillBytes(make([]byte, 32))), b64(signer.Y.FillBytes(make([]byte, 32))))
	var ln net.Listener
	if err := c.ns.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", apiServerIP+":443")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+saToken {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":"https://10.96.0.1:443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}`, issuer)
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, jwks) })
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{apiCert}}, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	token := func(aud string) string {
		header := b64([]byte(`{"alg":"ES256","kid":"k1"}`))
		claims := b64(fmt.Appendf(nil, `{"aud":[%q],"exp":%d,"iat":%d,"iss":%q,"kubernetes.io":{"namespace":"ns1","serviceaccount":{"name":"default","uid":"u"}},"sub":"system:serviceaccount:ns1:default"}`,
			aud, time.Now().Add(time.Hour).Unix(), time.Now().Unix(), issuer))
		sum := sha256.Sum256([]byte(header + "." + claims))
		r, s, _ := ecdsa.Sign(rand.Reader, signer, sum[:])
		return header + "." + claims + "." + b64(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))
	}
	env := []string{"KUBERNETES_SERVICE_HOST=" + apiServerIP, "KUBERNETES_SERVICE_PORT=443"}
	for _, tc := range []struct {
		name, aud string
		code      int
		want      string
	}{
		{"valid token", "oidc-discovery-test", 0, `OK: Validated signature on JWT\n.*OK: Got valid claims from token!\n`},
		{"other audience", "someone-else", 1, `oidc: expected audience "oidc-discovery-test" got \["someone-else"\]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{
				"/var/run/secrets/tokens/sa-token":                     token(tc.aud),
				"/var/run/secrets/kubernetes.io/serviceaccount/token":  saToken,
				"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt": pki.caPEM,
			}
			p, out := c.startInNet(t, []string{"test-service-account-issuer-discovery", "--token-path", "/var/run/secrets/tokens/sa-token", "--audience", "oidc-discovery-test"}, env, files)
			code := p.Wait()
			if code != tc.code || !regexp.MustCompile("(?s)"+tc.want).MatchString(out.String()) {
				t.Errorf("code %d (want %d) output %q", code, tc.code, out.String())
			}
		})
	}
}
