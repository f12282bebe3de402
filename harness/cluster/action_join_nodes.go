package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/plugsim/plugsim/harness/cluster/nodens"
	"github.com/plugsim/plugsim/internal/atomicfile"
	corev1 "k8s.io/api/core/v1"
)

// joinNodes makes each of this machine's nodes but its kubelet: its namespace and veth, its directory and
// kubelet configuration, cri-fake, and the ephemeral-only CSI driver.
//
// Of the CSI drivers only the ephemeral one runs here: csi.plugsim.dev's volumes live in the first
// machine's directory (network-attached storage stops at the machine), so its node plugin is not
// registered here and the scheduler keeps pods with its claims on the first machine's nodes (their PVs'
// zone label is theirs only). Inline ephemeral volumes, emptyDir, configMap, secret and projected
// volumes work on every node.
type joinNodes struct{}

func (joinNodes) Name() string { return "start this machine's nodes" }

func (joinNodes) Execute(c *actionContext) error {
	for i := 1; i <= c.o.Nodes; i++ {
		name, ip := c.nodeName(i), c.nodeIP(i)
		netns, err := nodeNamespace(c, name, ip)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		nd, err := nodeDir(c, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := atomicfile.Write(filepath.Join(nd, "resolv.conf"), nodeResolvConf(), 0o644); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(nd, "kubelet.yaml"), kubeletConfig(nd, ip, c.path("pki", "ca.crt"), ServingSelfSigned), 0o600); err != nil {
			return err
		}
		// Its cgroup, mount namespace and cgroup namespace, which its kubelet, cri-fake and csi-fake share
		// (package nodens), as an `up` node's.
		cgroup := nodens.NodeCgroup(c.st.Prefix, name)
		if err := nodens.MakeNodeCgroup(cgroup); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := nodens.MakeMountNS(nd, cgroup); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := startCRIFake(c, name, nd, netns); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := c.startNodeProc(name, "csi-fake-ephemeral", netns, nd, c.bin("csi-fake"), ephemeralDriverArgs(name, nd)); err != nil {
			return err
		}
	}
	c.step("%d node(s) %s-node1… started: cri-fake and the ephemeral CSI driver each", c.o.Nodes, c.join.name)
	return nil
}

// joinKubelets starts this machine's kubelets with the bootstrap kubeconfig: each asks the cluster for
// its client certificate (a CSR the csrapproving controller approves), writes its kubeconfig and
// registers its Node. It serves the kubelet API with a certificate it signs itself.
type joinKubelets struct{}

func (joinKubelets) Name() string { return "start this machine's kubelets" }

func (joinKubelets) Execute(c *actionContext) error {
	c.st.mu.Lock()
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	for _, n := range nodes {
		nd := c.path("nodes", n.Name)
		if err := startKubelet(c, n.Name, nd, n.Netns, n.IP,
			"--bootstrap-kubeconfig", c.path("bootstrap.kubeconfig"),
			"--kubeconfig", filepath.Join(nd, "kubelet.kubeconfig"),
			"--cert-dir", filepath.Join(nd, "pki")); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	if err := c.waitNodes("registered (client certificates bootstrapped)", func(*corev1.Node) bool { return true }); err != nil {
		return err
	}
	return nil
}
