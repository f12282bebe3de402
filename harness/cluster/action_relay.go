package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// apiRelay starts `harness cluster relay`: it listens on the host's 127.0.0.1 (the socket made here and
// handed over as its fd 3, so the port is known before it runs) and carries each connection to the API
// server inside the control-plane namespace. It writes DIR/kubeconfig, which names it.
type apiRelay struct{}

func (apiRelay) Name() string { return "start the relay to the API server" }

func (apiRelay) Execute(c *actionContext) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.o.Port)))
	if err != nil {
		return err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	defer f.Close()
	c.st.Port = ln.Addr().(*net.TCPAddr).Port
	args := append(append([]string{}, c.o.Relay[1:]...), "--dir", c.o.Dir, "--netns", nsPath(c.cpNS), "--target", fmt.Sprintf("127.0.0.1:%d", apiPort))
	if _, err := c.startProc("relay", "", c.o.Relay[0], args, f); err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.st.Port)
	if err := atomicfile.Write(c.path("kubeconfig"), kubeconfig(server, c.ca.pem, "admin", c.adminKP), 0o600); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.pem)
	cert, err := tls.X509KeyPair(c.adminKP.cert, c.adminKP.key)
	if err != nil {
		return err
	}
	c.admin = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}
	c.server = server
	c.step("relay: host 127.0.0.1:%d → %s 127.0.0.1:%d", c.st.Port, c.cpNS, apiPort)
	return nil
}
