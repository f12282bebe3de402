package cluster

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// podNetwork waits for every node's pod CIDR, writes each node's conflist (into its conf dir unless
// EmptyCNI) and routes each node's pod CIDR through its address on every other node and in the
// control-plane namespace, as Calico's BGP routes do without encapsulation.
type podNetwork struct{}

func (podNetwork) Name() string { return "set up the pod network" }

func (podNetwork) Execute(c *actionContext) error {
	if err := c.waitNodes("registered with a podCIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" }); err != nil {
		return err
	}
	var list corev1.NodeList
	if _, err := c.get("/api/v1/nodes", &list); err != nil {
		return err
	}
	cidr := map[string]string{}
	for _, n := range list.Items {
		cidr[n.Name] = n.Spec.PodCIDR
	}
	c.st.mu.Lock()
	for i := range c.st.Nodes {
		c.st.Nodes[i].PodCIDR = cidr[c.st.Nodes[i].Name]
	}
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	if err := c.st.save(); err != nil {
		return err
	}
	for _, n := range nodes {
		nd := c.path("nodes", n.Name)
		conf := conflist(nd, n.PodCIDR)
		if err := atomicfile.Write(filepath.Join(nd, "cni", "plugsim.conflist"), conf, 0o644); err != nil {
			return err
		}
		if !c.o.EmptyCNI {
			if err := writeAtomic(filepath.Join(nd, "cni", "net.d", "10-plugsim.conflist"), conf); err != nil {
				return err
			}
		}
		var routes [][]string
		for _, m := range nodes {
			if m.Name != n.Name {
				routes = append(routes, []string{"route", "add", m.PodCIDR, "via", m.IP})
			}
		}
		if err := ipBatch(n.Netns, routes); err != nil {
			return err
		}
		c.step("%s %s podCIDR %s", n.Name, n.IP, n.PodCIDR)
	}
	// The control plane reaches every pod, and a pod's packets to the API server get their answer: the
	// control-plane namespace routes each node's pod CIDR through that node (what a node's BGP peer
	// would learn), so the API server's pod and service proxy, admission and conversion webhooks and
	// aggregated API servers reach pod IPs.
	var routes [][]string
	for _, n := range nodes {
		routes = append(routes, []string{"route", "add", n.PodCIDR, "via", n.IP})
	}
	if err := ipBatch(c.cpNS, routes); err != nil {
		return err
	}
	c.step("%s routes the pod CIDRs through their nodes", c.cpNS)
	return nil
}

// conflist is a node's CNI configuration: cni-fake in veth mode (the pod's eth0 paired with a veth in the
// node's namespace, a host route to the pod) with addresses from the node's pod CIDR, then portmap.
// portmap's backend is named: without it, portmap runs `iptables --version` on every ADD and DEL, even
// of a pod with no hostPort, to choose between iptables and nftables (plugins v1.10.0
// plugins/meta/portmap/main.go, ensureBackend); kube-proxy runs in iptables mode here too.
func conflist(nd, podCIDR string) []byte {
	return fmt.Appendf(nil, `{
  "cniVersion": "1.1.0",
  "name": "plugsim",
  "plugins": [
    {
      "type": "cni-fake",
      "mode": "veth",
      "dataDir": "%[1]s/cni/data",
      "logFile": "%[1]s/cni.jsonl",
      "faultsFile": "%[1]s/cni/faults.json",
      "ipam": {"type": "cni-fake", "ranges": [[{"subnet": "%[2]s"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "backend": "iptables", "snat": true, "capabilities": {"portMappings": true}}
  ]
}
`, nd, podCIDR)
}
