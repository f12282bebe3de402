package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// kubeProxy runs the real kube-proxy v1.37.2 on every node, in the node's network namespace, as k3s runs
// it (a process of the node, not a DaemonSet: its iptables rules must be made in the node's namespace by
// the iptables of this machine, which a simulated container does not have), in the node's cgroup
// (system.slice/kube-proxy.service), so the node's usage in the summary API counts it. It programs ClusterIP,
// NodePort, session affinity and the rest from Services and EndpointSlices in iptables mode (the default
// mode on Linux and kind's; portmap's hostPort rules are iptables rules in the same tables), with a
// client certificate of user system:kube-proxy, whom the default RBAC binds to system:node-proxier.
// `up` waits until each has synced once (its /healthz answers 200), so the kubernetes Service leads to
// the API server when `up` returns. Its rules live in the node's namespace: `down` removes them with it.
type kubeProxy struct{}

func (kubeProxy) Name() string { return "start kube-proxy on every node" }

const kubeProxyHealthz = "127.0.0.1:10256"

func (kubeProxy) Execute(c *actionContext) error {
	c.st.mu.Lock()
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	kp, err := c.ca.issue(certSpec{cn: "system:kube-proxy", client: true})
	if err != nil {
		return err
	}
	inside := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
	for _, n := range nodes {
		nd := c.path("nodes", n.Name)
		if err := atomicfile.Write(filepath.Join(nd, "kube-proxy.kubeconfig"), kubeconfig(inside, c.ca.pem, "system:kube-proxy", kp), 0o600); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(nd, "kube-proxy.yaml"), kubeProxyConfig(nd, n.Name), 0o600); err != nil {
			return err
		}
		if _, err := c.startNodeNetProc(n.Name, "kube-proxy", n.Netns, nd, c.bin("kube-proxy"), []string{"--config", filepath.Join(nd, "kube-proxy.yaml")}); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, nsPath(n.Netns), addr) },
		}}
		if err := c.wait(n.Name+"'s kube-proxy to sync its rules (/healthz)", func() (bool, string) {
			resp, err := client.Get("http://" + kubeProxyHealthz + "/healthz")
			if err != nil {
				return false, err.Error()
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status + ": " + string(b)
		}); err != nil {
			return err
		}
	}
	c.step("kube-proxy v1.37.2 (iptables mode) synced on %d node(s): the kubernetes Service %s:443 leads to %s:%d", len(nodes), serviceIP, cpAddr, apiPort)
	return nil
}

// kubeProxyConfig is a node's KubeProxyConfiguration. conntrack.maxPerCore 0 leaves nf_conntrack_max
// alone: it is the machine's, shared by every node namespace, not kube-proxy's to size.
func kubeProxyConfig(nd, name string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %[1]s/kube-proxy.kubeconfig
hostnameOverride: %[2]s
clusterCIDR: %[3]s
detectLocalMode: ClusterCIDR
healthzBindAddress: %[4]s
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
`, nd, name, clusterCIDR, kubeProxyHealthz)
}
