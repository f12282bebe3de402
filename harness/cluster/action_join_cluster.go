package cluster

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// reachCluster reads the admin kubeconfig `join` was given, checks that the API server answers, and
// keeps what the nodes need of it: the CA, the API server's address, the kubernetes Service's address.
// The kubeconfig is copied into DIR (owner-only), where `down` reads it to delete this machine's Nodes.
type reachCluster struct{}

func (reachCluster) Name() string { return "reach the cluster to join" }

func (reachCluster) Execute(c *actionContext) error {
	kc, err := readKubeconfig(c.join.kubeconfig)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(c.join.kubeconfig)
	if err != nil {
		return err
	}
	copyPath := c.path("cluster.kubeconfig")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		return err
	}
	c.st.mu.Lock()
	c.st.Join = &JoinState{Kubeconfig: copyPath}
	c.st.mu.Unlock()
	if err := c.st.save(); err != nil {
		return err
	}
	c.admin, c.server, c.join.caPEM = kc.client, kc.server, kc.caPEM
	if err := os.WriteFile(c.path("pki", "ca.crt"), kc.caPEM, 0o644); err != nil {
		return err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if _, err := c.get("/version", &v); err != nil {
		return fmt.Errorf("the API server %s: %w", kc.server, err)
	}
	u, err := url.Parse(kc.server)
	if err != nil {
		return err
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	// The nodes reach the API server at the address the kubeconfig names (the one its certificate
	// holds), which is made to lead to it inside each node's namespace (joinRelay).
	addrs, err := net.DefaultResolver.LookupHost(c.ctx, host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("resolve the API server's host %s: %v", host, err)
	}
	if net.ParseIP(addrs[0]).To4() == nil {
		return fmt.Errorf("the API server's address %s is not IPv4: the nodes' namespaces are IPv4 only", addrs[0])
	}
	c.join.apiAddr = net.JoinHostPort(addrs[0], port)
	var svc corev1.Service
	if _, err := c.get("/api/v1/namespaces/default/services/kubernetes", &svc); err != nil {
		return err
	}
	c.join.serviceIP = svc.Spec.ClusterIP
	c.step("cluster %s (Kubernetes %s) reached; its kubernetes Service is %s", kc.server, v.GitVersion, c.join.serviceIP)
	return nil
}

// kubeconfigClient is what a kubeconfig's current context says: the server, its CA, and an HTTP client
// that authenticates as the user (client certificate or bearer token).
type kubeconfigClient struct {
	server string
	caPEM  []byte
	client *http.Client
}

// readKubeconfig reads the current context of a kubeconfig. Exec and auth-provider plugins are not
// run: a cluster whose admin logs in through one needs a kubeconfig with a certificate or a token.
func readKubeconfig(path string) (*kubeconfigClient, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc struct {
		CurrentContext string `json:"current-context"`
		Contexts       []struct {
			Name    string `json:"name"`
			Context struct {
				Cluster string `json:"cluster"`
				User    string `json:"user"`
			} `json:"context"`
		} `json:"contexts"`
		Clusters []struct {
			Name    string `json:"name"`
			Cluster struct {
				Server   string `json:"server"`
				CAData   string `json:"certificate-authority-data"`
				CAFile   string `json:"certificate-authority"`
				Insecure bool   `json:"insecure-skip-tls-verify"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			Name string `json:"name"`
			User struct {
				CertData  string          `json:"client-certificate-data"`
				KeyData   string          `json:"client-key-data"`
				CertFile  string          `json:"client-certificate"`
				KeyFile   string          `json:"client-key"`
				Token     string          `json:"token"`
				TokenFile string          `json:"tokenFile"`
				Exec      json.RawMessage `json:"exec"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var clusterName, userName string
	for _, ctx := range kc.Contexts {
		if ctx.Name == kc.CurrentContext {
			clusterName, userName = ctx.Context.Cluster, ctx.Context.User
		}
	}
	if clusterName == "" {
		return nil, fmt.Errorf("%s: no current context", path)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(path), p)
	}
	data := func(inline, file string) ([]byte, error) {
		if inline != "" {
			return base64.StdEncoding.DecodeString(inline)
		}
		if file != "" {
			return os.ReadFile(rel(file))
		}
		return nil, nil
	}
	out := &kubeconfigClient{}
	tc := &tls.Config{}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		if cl.Cluster.Insecure {
			return nil, fmt.Errorf("%s: insecure-skip-tls-verify: the nodes need the cluster's CA", path)
		}
		out.server = strings.TrimRight(cl.Cluster.Server, "/")
		if out.caPEM, err = data(cl.Cluster.CAData, cl.Cluster.CAFile); err != nil {
			return nil, fmt.Errorf("%s: the cluster's CA: %w", path, err)
		}
	}
	if !found || out.server == "" || len(out.caPEM) == 0 {
		return nil, fmt.Errorf("%s: cluster %q has no server or no certificate authority", path, clusterName)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(out.caPEM) {
		return nil, fmt.Errorf("%s: the cluster's CA is not PEM", path)
	}
	tc.RootCAs = pool
	var token string
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		if len(u.User.Exec) > 0 && string(u.User.Exec) != "null" {
			return nil, fmt.Errorf("%s: user %q logs in through an exec plugin, which join does not run: give it a kubeconfig with a client certificate or a token", path, userName)
		}
		cert, err := data(u.User.CertData, u.User.CertFile)
		if err != nil {
			return nil, err
		}
		key, err := data(u.User.KeyData, u.User.KeyFile)
		if err != nil {
			return nil, err
		}
		if len(cert) > 0 {
			kp, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("%s: user %q: %w", path, userName, err)
			}
			tc.Certificates = []tls.Certificate{kp}
		}
		token = u.User.Token
		if u.User.TokenFile != "" {
			t, err := os.ReadFile(rel(u.User.TokenFile))
			if err != nil {
				return nil, err
			}
			token = strings.TrimSpace(string(t))
		}
	}
	if len(tc.Certificates) == 0 && token == "" {
		return nil, fmt.Errorf("%s: user %q has neither a client certificate nor a token", path, userName)
	}
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tc}
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	out.client = &http.Client{Timeout: 15 * time.Second, Transport: rt}
	return out, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// send sends a request with a JSON body (when obj is not nil) as the admin and returns the status.
// A status outside 2xx is an error holding the API server's message, unless it is one of ok.
func send(client *http.Client, method, u string, obj any, ok ...int) (int, error) {
	var body io.Reader
	if obj != nil {
		b, err := json.Marshal(obj)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return 0, err
	}
	if obj != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, nil
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp.StatusCode, nil
		}
	}
	return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(msg)))
}

// create POSTs obj to the collection at path; one that exists already is left as it is.
func (c *actionContext) create(path string, obj any) error {
	_, err := send(c.admin, "POST", c.server+path, obj, http.StatusConflict)
	return err
}

// errNotJoined is what `down` of a joining machine says when its kubeconfig is gone.
var errNotJoined = errors.New("the joined cluster's kubeconfig is gone")
