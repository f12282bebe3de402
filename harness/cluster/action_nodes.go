package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// nodes starts every node: a network namespace with a veth on the control-plane bridge, the node's
// certificates and kubelet configuration, cri-fake (real pod network namespaces, the CNI chain) and a
// real kubelet registering with the API server.
type nodes struct{}

func (nodes) Name() string { return "start the nodes" }

func (nodes) Execute(c *actionContext) error {
	for i := 1; i <= c.o.Nodes; i++ {
		if err := startNode(c, i); err != nil {
			return fmt.Errorf("%s: %w", nodeName(i), err)
		}
	}
	c.step("%d node(s) started: kubelet and cri-fake each", c.o.Nodes)
	return nil
}

// startNode makes node i: its network namespace and veth, its certificates and configuration, its mount
// namespace, and starts cri-fake and the kubelet in them.
func startNode(c *actionContext, i int) error {
	name, ip := nodeName(i), nodeIP(i)
	netns := fmt.Sprintf("%s-%s", c.st.Prefix, name)
	c.st.mu.Lock()
	c.st.Nodes = append(c.st.Nodes, Node{Name: name, Netns: netns, IP: ip})
	c.st.mu.Unlock()
	if err := c.st.addNetns(netns); err != nil {
		return err
	}
	peer := "veth-" + name // in the control-plane namespace, on the bridge
	if err := ipCmds([][]string{
		{"netns", "add", netns},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", c.cpNS},
		{"-n", c.cpNS, "link", "set", peer, "master", bridgeName},
		{"-n", c.cpNS, "link", "set", peer, "up"},
		{"-n", netns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		// The default route ends at the control-plane namespace, which forwards nothing: the kubelet and
		// the pods see a node with a default route, and no packet leaves the machine.
		{"-n", netns, "route", "add", "default", "via", cpAddr},
	}); err != nil {
		return err
	}
	// A node routes for its pods (and, once the pod CIDRs are known, for the other nodes' pods).
	if out, err := exec.Command("nsenter", "--net="+nsPath(netns), "--", "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return fmt.Errorf("ip_forward: %v: %s", err, out)
	}

	nd := c.path("nodes", name)
	// The node's own files, its traces among them, are root's only (0600 files in a 0700 directory).
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return err
	}
	for _, d := range []string{"kubelet/plugins_registry", "kubelet/plugins/" + driverName, "kubelet/plugins/" + ephemeralDriver, "logs", "cni/net.d", "cni/data", "cri", "state/cri", "state/csi", "state/csi-ephemeral"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return err
		}
	}
	// The conflist names cni-fake's faults file, which must exist (cni-fake refuses a missing one).
	if err := nodeCNIFaults(nd).Reset(); err != nil {
		return err
	}
	client, err := c.ca.issue(certSpec{cn: "system:node:" + name, groups: []string{"system:nodes"}, client: true})
	if err != nil {
		return err
	}
	if c.o.KubeletServingCerts == ServingClusterCA {
		serving, err := c.ca.issue(certSpec{cn: name, dns: []string{name}, ips: ips(ip), server: true})
		if err != nil {
			return err
		}
		if err := serving.write(nd, "kubelet-serving"); err != nil {
			return err
		}
	}
	inside := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
	if err := atomicfile.Write(filepath.Join(nd, "kubelet.kubeconfig"), kubeconfig(inside, c.ca.pem, "system:node:"+name, client), 0o600); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(nd, "kubelet.yaml"), kubeletConfig(nd, ip, c.path("pki", "ca.crt"), c.o.KubeletServingCerts), 0o644); err != nil {
		return err
	}
	// Its mount namespace, which its kubelet, cri-fake and csi-fakes share (mountns.go).
	if err := makeNodeMountNS(nd); err != nil {
		return err
	}

	// Program images (cri-fake/oci) run under the real runc when it is built: their cgroups in one
	// parent per node, named for the cluster, which `down` removes with the rest of what runc made.
	runc := "none"
	if fi, err := os.Stat(c.bin("runc")); err == nil && fi.Mode().IsRegular() {
		runc = c.bin("runc")
		c.st.mu.Lock()
		c.st.Runc = runc
		c.st.mu.Unlock()
		if err := c.st.save(); err != nil {
			return err
		}
	}
	if _, err := c.startNodeProc(name+"-cri-fake", netns, nd, c.bin("cri-fake"), []string{
		"--runc", runc, "--cgroup-parent", c.st.Prefix + "-" + name + "-programs",
		"--endpoint", "unix://" + filepath.Join(nd, "cri.sock"),
		"--root-dir", filepath.Join(nd, "cri"), "--state-dir", filepath.Join(nd, "state/cri"),
		"--netns", "real", "--cni-conf-dir", filepath.Join(nd, "cni/net.d"), "--cni-bin-dir", c.o.BinDir,
		// runc as containerd's default names it, and a second handler a RuntimeClass can name (what a node
		// with gVisor installed would serve); any other handler fails RunPodSandbox as containerd's does.
		"--runtime-handlers", "runc," + extraRuntimeHandler,
		"--trace", filepath.Join(nd, "cri.jsonl"), "--admin-socket", "unix://" + nodeCRIAdmin(nd),
	}); err != nil {
		return err
	}
	if err := c.wait(name+"'s cri-fake socket", func() (bool, string) {
		_, err := os.Stat(filepath.Join(nd, "cri.sock"))
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	return startKubelet(c, i)
}

// startKubelet starts node i's kubelet in its namespaces with the node's configuration file (`up`, and
// `harness cluster restart-kubelet` after that file was edited).
func startKubelet(c *actionContext, i int) error {
	name, ip := nodeName(i), nodeIP(i)
	nd := c.path("nodes", name)
	_, err := c.startNodeProc(name+"-kubelet", fmt.Sprintf("%s-%s", c.st.Prefix, name), nd, c.bin("kubelet"), []string{
		"--config", filepath.Join(nd, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(nd, "kubelet.kubeconfig"),
		// /var/lib/kubelet, as on any node: in the node's mount namespace it is DIR/nodes/NODE/kubelet
		// (mountns.go).
		"--root-dir", kubeletFixedDir,
		// Where a kubeadm node keeps them: the certificate the kubelet makes itself (self-signed) or the
		// one its CSR brought (serverTLSBootstrap).
		"--cert-dir", filepath.Join(kubeletFixedDir, "pki"),
		"--hostname-override", name,
		// Without it the kubelet resolves its host name through DNS (no server in reach: 10 s a lookup).
		"--node-ip", ip,
	})
	return err
}

// kubeletConfig is a node's KubeletConfiguration: the standalone suite's settings for this machine (no
// cgroup hierarchy of its own, cgroupfs), serving on the node's address with the serving certificate
// the mode says (serving.go), and checking callers against the API server (webhook authentication and
// authorisation).
func kubeletConfig(nd, ip, caFile, serving string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: false
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
cgroupDriver: cgroupfs
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%[1]s/cri.sock
podLogsDir: %[1]s/logs
%[4]sclusterDomain: cluster.local
# No DNS server runs in the cluster, and the host's resolv.conf names servers out of reach.
resolvConf: ""
# The machine's disk and memory are shared by every node: the default thresholds (10%% disk free) would
# put DiskPressure on all of them at once on a full disk.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s}
authorization: {mode: Webhook}
`, nd, ip, caFile, servingKubeletConfig(serving, nd))
}
