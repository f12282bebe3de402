package cluster

// Where each kubelet's serving certificate (the one on port 10250, which the API server's logs, exec and
// port-forward and metrics-server's scrapes of /metrics/resource meet) comes from.
const (
	// ServingSelfSigned is kubeadm's default: no tlsCertFile in the KubeletConfiguration, so the kubelet
	// makes its own at start, self-signed, for its host name alone (cmd/kubelet/app/server.go,
	// InitializeTLS: certutil.GenerateSelfSignedCertKey(hostName, nil, nil)): no IP SAN. A client that
	// checks it by the node's address fails with "x509: cannot validate certificate for 198.18.0.11
	// because it doesn't contain any IP SANs"; as on kubeadm, the API server does not check it (no
	// --kubelet-certificate-authority).
	ServingSelfSigned = "self-signed"
	// ServingBootstrap is serverTLSBootstrap: true: the kubelet asks for its certificate with a CSR of
	// signer kubernetes.io/kubelet-serving (its host name and addresses), which stays Pending until
	// someone approves it (kubectl certificate approve: the controller-manager never approves these by
	// itself); the controller-manager then signs it with the cluster's CA. Until then the kubelet serves
	// no certificate at all. The API server checks the certificate against the cluster's CA.
	ServingBootstrap = "bootstrap"
	// ServingClusterCA is a certificate `up` writes for each kubelet, signed by the cluster's CA, for the
	// node's name and address, with no CSR to approve; the API server checks it against that CA.
	ServingClusterCA = "cluster-ca"
)

// servingKubeletConfig is the KubeletConfiguration's serving-certificate part for mode: the files `up`
// wrote (cluster-ca), serverTLSBootstrap (bootstrap), or nothing, so the kubelet makes its own in its
// --cert-dir (self-signed).
func servingKubeletConfig(mode, nd string) string {
	switch mode {
	case ServingClusterCA:
		return "tlsCertFile: " + nd + "/kubelet-serving.crt\ntlsPrivateKeyFile: " + nd + "/kubelet-serving.key\n"
	case ServingBootstrap:
		return "serverTLSBootstrap: true\n"
	}
	return ""
}

// apiServerChecksKubelets says whether the API server gets --kubelet-certificate-authority: only when
// every kubelet's certificate is one the cluster's CA signs (kubeadm never sets it).
func apiServerChecksKubelets(mode string) bool { return mode != ServingSelfSigned }
