package cluster

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidNodePrefix(t *testing.T) {
	for s, want := range map[string]bool{
		"m2": true, "machine-2": true, "a": true,
		"": false, "2m": false, "M2": false, "m_2": false, "m2-": false, "m.2": false, strings.Repeat("a", 41): false,
	} {
		if got := validNodePrefix(s); got != want {
			t.Errorf("validNodePrefix(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestRandomTokenIsABootstrapToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := randomToken(6)
		if len(id) != 6 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || seen[id] {
			t.Fatalf("token id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// readKubeconfig follows the current context to its cluster and user, authenticates with the user's
// token, trusts only the cluster's CA, and refuses what join cannot use.
func TestReadKubeconfig(t *testing.T) {
	var got string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		json.NewEncoder(w).Encode(map[string]string{"gitVersion": "v1.37.2"})
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pemCert(srv.Certificate().Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(user string) string {
		p := filepath.Join(dir, "kubeconfig")
		os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
current-context: admin
contexts:
- {name: other, context: {cluster: nowhere, user: nobody}}
- {name: admin, context: {cluster: c1, user: u1}}
clusters:
- {name: nowhere, cluster: {server: "https://192.0.2.1", certificate-authority: ca.crt}}
- {name: c1, cluster: {server: "`+srv.URL+`/", certificate-authority: ca.crt}}
users:
- {name: nobody, user: {token: wrong}}
- {name: u1, user: `+user+`}
`), 0o600)
		return p
	}
	kc, err := readKubeconfig(write("{token: s3cret}"))
	if err != nil {
		t.Fatal(err)
	}
	if kc.server != srv.URL {
		t.Errorf("server %q, want %q", kc.server, srv.URL)
	}
	if _, err := send(kc.client, "GET", kc.server+"/version", nil); err != nil || got != "Bearer s3cret" {
		t.Errorf("GET /version: %v, Authorization %q", err, got)
	}
	if _, err := readKubeconfig(write(`{exec: {command: gcloud}}`)); err == nil || !strings.Contains(err.Error(), "exec plugin") {
		t.Errorf("an exec plugin: %v", err)
	}
	if _, err := readKubeconfig(write(`{username: admin}`)); err == nil || !strings.Contains(err.Error(), "neither a client certificate nor a token") {
		t.Errorf("no credentials: %v", err)
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
