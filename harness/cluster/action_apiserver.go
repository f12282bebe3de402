package cluster

import (
	"strconv"
)

// apiServer starts kube-apiserver v1.37.2 in the control-plane namespace, waits for its /readyz through
// the relay, and lets its kubelet client use the kubelets' API.
type apiServer struct{}

func (apiServer) Name() string { return "start kube-apiserver" }

func (apiServer) Execute(c *actionContext) error {
	pki := func(f string) string { return c.path("pki", f) }
	apiArgs := []string{"kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort), "--advertise-address", cpAddr,
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"),
		"--service-cluster-ip-range", serviceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--authorization-mode", "Node,RBAC",
		// Bootstrap tokens (Secrets in kube-system) authenticate the kubelets of a joining machine
		// until they have their certificates (`harness cluster join`, action_join_bootstrap.go).
		"--enable-bootstrap-token-auth=true",
		// ServiceAccount is on by default; NodeRestriction keeps each kubelet to its own Node and pods.
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--allow-privileged=true",
		"--requestheader-client-ca-file", pki("front-proxy-ca.crt"), "--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", pki("front-proxy-client.crt"), "--proxy-client-key-file", pki("front-proxy-client.key"),
		"--cert-dir", c.path("pki", "apiserver-generated"),
		"--profiling=false",
		// Admission webhooks, CRD conversion webhooks and aggregated API servers are Services the API
		// server calls. Without this it dials the Service's ClusterIP, which only kube-proxy (or a
		// node's rules) could carry, and the control-plane namespace runs none; with it the resolver is
		// the endpoint one (cmd/kube-apiserver/app/server.go buildServiceResolver:
		// NewEndpointServiceResolver), which picks a ready endpoint's pod IP, routed to its node.
		"--enable-aggregator-routing=true",
	}
	if apiServerChecksKubelets(c.o.KubeletServingCerts) {
		// Only when the cluster's CA signs the kubelets' serving certificates: kubeadm leaves it out, and
		// the API server then does not check them (a self-signed one would fail every logs, exec and
		// port-forward).
		apiArgs = append(apiArgs, "--kubelet-certificate-authority", pki("ca.crt"))
	}
	if _, err := c.startProc("kube-apiserver", c.cpNS, c.bin("kube"), c.withExtra("kube-apiserver", apiArgs)); err != nil {
		return err
	}
	if err := c.wait("the API server's /readyz (through the relay)", func() (bool, string) {
		if _, err := c.get("/readyz", nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	}); err != nil {
		return err
	}
	c.step("kube-apiserver v1.37.2 ready on %s:%d (Node,RBAC)", cpAddr, apiPort)

	// The API server's kubelet client: kubectl logs, exec and port-forward go through it.
	if err := c.apply("rbac.yaml", []byte(rbacManifest)); err != nil {
		return err
	}
	return nil
}
