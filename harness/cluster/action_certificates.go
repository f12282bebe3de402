package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// certificates writes the cluster's PKI into DIR/pki and the components' kubeconfigs into
// DIR/kubeconfigs.
type certificates struct{}

func (certificates) Name() string { return "write the certificates" }

// One CA signs them all (clients and servers; the API server trusts it for
// client certificates, the kubelets and the controller-manager for the API server, the API server for the
// kubelets' serving certificates).
func (certificates) Execute(c *actionContext) error {
	var err error
	if c.ca, err = newCA("plugsim-ca"); err != nil {
		return err
	}
	dir := c.path("pki")
	if err := atomicfile.Write(filepath.Join(dir, "ca.crt"), c.ca.pem, 0o644); err != nil {
		return err
	}
	caKey, err := c.ca.keyPEM()
	if err != nil {
		return err
	}
	// The controller-manager signs CSRs (kubelet serving and client rotation) with it.
	if err := atomicfile.Write(filepath.Join(dir, "ca.key"), caKey, 0o600); err != nil {
		return err
	}
	if err := serviceAccountKeys(dir); err != nil {
		return err
	}
	leaves := map[string]certSpec{
		// The names and addresses a client may reach it by: the host's relay (127.0.0.1), the bridge
		// (the kubelets), the kubernetes Service's address and names (pods).
		"apiserver": {cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: ips("127.0.0.1", cpAddr, serviceIP)},
		// --kubelet-client-certificate: bound to system:kubelet-api-admin (kubectl logs, exec, port-forward).
		"apiserver-kubelet-client": {cn: "kube-apiserver-kubelet-client", client: true},
		"admin":                    {cn: "plugsim-admin", groups: []string{"system:masters"}, client: true},
		// The bootstrap RBAC policy binds these two user names to their roles.
		"controller-manager": {cn: "system:kube-controller-manager", client: true},
		"scheduler":          {cn: "system:kube-scheduler", client: true},
	}
	// The front proxy: the API server's client to aggregated API servers, and what the controller-manager's
	// and scheduler's delegated authentication read from extension-apiserver-authentication (without it
	// they log a missing CA bundle, over and over). A CA of its own, as kubeadm makes.
	fp, err := newCA("plugsim-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "front-proxy-ca.crt"), fp.pem, 0o644); err != nil {
		return err
	}
	fpClient, err := fp.issue(certSpec{cn: "front-proxy-client", client: true})
	if err != nil {
		return err
	}
	if err := fpClient.write(dir, "front-proxy-client"); err != nil {
		return err
	}
	kps := map[string]keyPair{}
	for name, spec := range leaves {
		kp, err := c.ca.issue(spec)
		if err != nil {
			return err
		}
		if err := kp.write(dir, name); err != nil {
			return err
		}
		kps[name] = kp
	}
	inside := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	for _, name := range []string{"controller-manager", "scheduler"} {
		if err := atomicfile.Write(c.path("kubeconfigs", name+".kubeconfig"), kubeconfig(inside, c.ca.pem, name, kps[name]), 0o600); err != nil {
			return err
		}
	}
	// DIR/kubeconfig's server is filled in once the relay has its port.
	c.adminKP = kps["admin"]
	c.step("certificates and kubeconfigs in %s", c.path("pki"))
	return nil
}
