package cluster

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"
)

// bootstrapToken lets this machine's kubelets get their client certificates the way a kubeadm join's do
// (the kubelet's TLS bootstrap, kubernetes.io/docs/reference/access-authn-authz/kubelet-tls-bootstrapping):
//
//   - a bootstrap token, a Secret of type bootstrap.kubernetes.io/token in kube-system that the API
//     server's bootstrap token authenticator (--enable-bootstrap-token-auth) accepts as the user
//     system:bootstrap:<id> in the groups system:bootstrappers and system:bootstrappers:plugsim;
//   - that group bound to system:node-bootstrapper (create a CertificateSigningRequest) and to
//     certificatesigningrequests:nodeclient, which the controller-manager's csrapproving controller
//     checks before approving a kubelet's client CSR (kubeadm binds system:bootstrappers:kubeadm:
//     default-node-token the same way, cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go);
//   - system:nodes bound to selfnodeclient, so a kubelet's renewal of its own certificate is approved;
//   - a bootstrap kubeconfig naming the API server as the admin kubeconfig does, with the token.
//
// The csrsigning controller then signs the approved CSR with the cluster's CA, and the kubelet writes
// its kubeconfig. The bindings have names of their own (plugsim:…), so a kubeadm cluster's are left
// as they are; `down` deletes the token.
type bootstrapToken struct{}

func (bootstrapToken) Name() string { return "make a bootstrap token for the kubelets" }

// bootstrapGroup is the extra group of the tokens `join` makes.
const bootstrapGroup = "system:bootstrappers:plugsim"

func (bootstrapToken) Execute(c *actionContext) error {
	id, secret := randomToken(6), randomToken(16)
	c.st.mu.Lock()
	c.st.Join.TokenID = id
	c.st.mu.Unlock()
	if err := c.st.save(); err != nil {
		return err
	}
	binding := func(name, role, kind, subject string) map[string]any {
		return map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": "plugsim"}},
			"roleRef":  map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []map[string]string{{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}},
		}
	}
	for _, b := range []map[string]any{
		binding("plugsim:kubelet-bootstrap", "system:node-bootstrapper", "Group", bootstrapGroup),
		binding("plugsim:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "Group", bootstrapGroup),
		binding("plugsim:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "Group", "system:nodes"),
	} {
		if err := c.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", b); err != nil {
			return err
		}
	}
	// A day: long enough for a slow join and a kubelet restarted before it had its certificate; a
	// bootstrap token's only use is to ask for that certificate.
	if err := c.create("/api/v1/namespaces/kube-system/secrets", map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
		"metadata": map[string]any{"name": "bootstrap-token-" + id, "namespace": "kube-system",
			"labels": map[string]string{"app.kubernetes.io/managed-by": "plugsim"}},
		"stringData": map[string]string{
			"description":                    "plugsim join of " + c.join.name + " (" + c.o.Dir + ")",
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              bootstrapGroup,
		},
	}); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("bootstrap.kubeconfig"), fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: kubelet-bootstrap
  user:
    token: %s.%s
contexts:
- name: bootstrap
  context: {cluster: cluster, user: kubelet-bootstrap}
current-context: bootstrap
`, c.server, b64(c.join.caPEM), id, secret), 0o600); err != nil {
		return err
	}
	c.step("bootstrap token %s (kube-system/bootstrap-token-%s, group %s) and its ClusterRoleBindings", id, id, bootstrapGroup)
	return nil
}

// randomToken is n characters of [a-z0-9], as bootstrap token IDs and secrets are.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		var r [1]byte
		for {
			rand.Read(r[:])
			if int(r[0]) < 252 { // 7 × 36: no bias
				break
			}
		}
		b[i] = alphabet[int(r[0])%len(alphabet)]
	}
	return string(b)
}
