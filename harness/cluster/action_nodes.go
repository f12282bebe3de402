package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/plugsim/plugsim/harness/cluster/nodens"
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
			return fmt.Errorf("%s: %w", c.nodeName(i), err)
		}
	}
	c.step("%d node(s) started: kubelet and cri-fake each", c.o.Nodes)
	return nil
}

// startNode makes node i: its network namespace and veth, its certificates and configuration, its mount
// namespace, and starts cri-fake and the kubelet in them.
func startNode(c *actionContext, i int) error {
	name, ip := c.nodeName(i), c.nodeIP(i)
	netns, err := nodeNamespace(c, name, ip)
	if err != nil {
		return err
	}
	nd, err := nodeDir(c, name)
	if err != nil {
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
	if err := atomicfile.Write(filepath.Join(nd, "resolv.conf"), nodeResolvConf(), 0o644); err != nil {
		return err
	}
	cgroup := nodens.NodeCgroup(c.st.Prefix, name)
	if err := nodens.MakeNodeCgroup(cgroup); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(nd, "kubelet.yaml"), kubeletConfig(nd, ip, c.path("pki", "ca.crt"), c.o.KubeletServingCerts), 0o600); err != nil {
		return err
	}
	// Its mount namespace and cgroup namespace, which its kubelet, cri-fake and csi-fakes share
	// (package nodens): in them the node's cgroup is the root, the kubelet's cgroupRoot "/" (package nodens).
	if err := nodens.MakeMountNS(nd, cgroup); err != nil {
		return err
	}
	if err := startCRIFake(c, name, nd, netns); err != nil {
		return err
	}
	return startKubelet(c, name, nd, netns, ip, "--kubeconfig", filepath.Join(nd, "kubelet.kubeconfig"))
}

// nodeNamespace makes a node's network namespace with its eth0 on the bridge of the hub namespace
// (c.cpNS) and a default route to the hub, and returns its name.
func nodeNamespace(c *actionContext, name, ip string) (string, error) {
	netns := fmt.Sprintf("%s-%s", c.st.Prefix, name)
	c.st.mu.Lock()
	c.st.Nodes = append(c.st.Nodes, Node{Name: name, Netns: netns, IP: ip})
	c.st.mu.Unlock()
	if err := c.st.addNetns(netns); err != nil {
		return "", err
	}
	peer := "veth-" + name // in the hub namespace, on the bridge
	if len(peer) > 15 {
		// An interface name has at most 15 bytes (IFNAMSIZ); a joining machine's node names are longer.
		peer = "veth-" + netns[len(netns)-10:]
	}
	if err := ipCmds([][]string{
		{"netns", "add", netns},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", c.cpNS},
		{"-n", c.cpNS, "link", "set", peer, "master", bridgeName},
		{"-n", c.cpNS, "link", "set", peer, "up"},
		{"-n", netns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		// The default route ends at the hub namespace, which forwards nothing: the kubelet and the pods
		// see a node with a default route, and no packet leaves the machine.
		{"-n", netns, "route", "add", "default", "via", c.hubAddr},
	}); err != nil {
		return "", err
	}
	// A node routes for its pods (and, once the pod CIDRs are known, for the other nodes' pods).
	if out, err := exec.Command("nsenter", "--net="+nsPath(netns), "--", "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip_forward: %v: %s", err, out)
	}
	return netns, nil
}

// nodeDir makes a node's directory DIR/nodes/NAME and what its components need in it.
func nodeDir(c *actionContext, name string) (string, error) {
	nd := c.path("nodes", name)
	// The node's own files, its traces among them, are root's only (0600 files in a 0700 directory).
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return "", err
	}
	for _, d := range []string{"kubelet/plugins_registry", "kubelet/plugins/" + driverName, "kubelet/plugins/" + ephemeralDriver, "logs", "cni/net.d", "cni/data", "cri", "state/cri", "state/csi", "state/csi-ephemeral"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return "", err
		}
	}
	// The conflist names cni-fake's faults file, which must exist (cni-fake refuses a missing one).
	if err := nodeCNIFaults(nd).Reset(); err != nil {
		return "", err
	}
	return nd, nil
}

// nodeTraceCapacity is how many recent calls a node's cri-fake keeps in memory for its admin socket's
// GET /trace: a node's trace file (cri.jsonl, which the live view follows) has every call, so the ring
// is only the admin socket's short look back. At cri-fake's default 4096, an idle node's ring held
// 5.1 of its 8.0 MiB of live heap (the kubelet's relist answers rendered as JSON, about 1.25 KiB a
// call); --extra-args cri-fake=--trace-capacity=N overrides it.
const nodeTraceCapacity = 256

// startCRIFake starts a node's cri-fake and waits for its socket.
func startCRIFake(c *actionContext, name, nd, netns string) error {
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
	if _, err := c.startNodeProc(name, "cri-fake", netns, nd, c.bin("cri-fake"), c.withExtra("cri-fake", []string{
		"--runc", runc, "--cgroup-parent", c.st.Prefix + "-" + name + "-programs",
		"--endpoint", "unix://" + filepath.Join(nd, "cri.sock"),
		"--root-dir", filepath.Join(nd, "cri"), "--state-dir", filepath.Join(nd, "state/cri"),
		"--netns", "real", "--cni-conf-dir", filepath.Join(nd, "cni/net.d"), "--cni-bin-dir", c.o.BinDir,
		// runc as containerd's default names it, and a second handler a RuntimeClass can name (what a node
		// with gVisor installed would serve); any other handler fails RunPodSandbox as containerd's does.
		"--runtime-handlers", "runc," + extraRuntimeHandler,
		"--image-catalog", c.path(imageCatalogFile),
		"--trace", filepath.Join(nd, "cri.jsonl"), "--admin-socket", "unix://" + nodeCRIAdmin(nd),
		"--trace-capacity", strconv.Itoa(nodeTraceCapacity),
	})); err != nil {
		return err
	}
	return c.wait(name+"'s cri-fake socket", func() (bool, string) {
		_, err := os.Stat(filepath.Join(nd, "cri.sock"))
		return err == nil, fmt.Sprint(err)
	})
}

// startKubelet starts a node's kubelet with its configuration file and its credentials (--kubeconfig, or
// a bootstrap kubeconfig): at `up`, at `join`, and at `harness cluster restart-kubelet` after that file
// was edited.
func startKubelet(c *actionContext, name, nd, netns, ip string, credentials ...string) error {
	args := append([]string{
		"--config", filepath.Join(nd, "kubelet.yaml"),
		// /var/lib/kubelet, as on any node: in the node's mount namespace it is DIR/nodes/NODE/kubelet
		// (package nodens).
		"--root-dir", nodens.KubeletFixedDir,
		"--hostname-override", name,
		// Without it the kubelet resolves its host name through DNS (no server in reach: 10 s a lookup).
		"--node-ip", ip,
	}, credentials...)
	if !slices.Contains(credentials, "--cert-dir") {
		// Where a kubeadm node keeps them: the certificate the kubelet makes itself (self-signed) or the
		// one its CSR brought (serverTLSBootstrap).
		args = append(args, "--cert-dir", filepath.Join(nodens.KubeletFixedDir, "pki"))
	}
	labels := NodeKindLabel + "=plugsim"
	if c.join != nil {
		// The CSI driver's DaemonSets stay off a joining machine's nodes (examples/csi/node.yaml): its
		// storage is the first machine's, and join runs the ephemeral driver there itself.
		labels += "," + JoinedLabel + "=" + c.join.name
	}
	args = append(args, "--node-labels", labels)
	_, err := c.startNodeProc(name, "kubelet", netns, nd, c.bin("kubelet"), c.withExtra("kubelet", args))
	return err
}

// kubeletConfig is a node's KubeletConfiguration: pod cgroups (cgroupsPerQOS) under the root of the
// node's cgroup namespace, which is the node's own cgroup (package nodens; cgroupfs, nothing enforced on the
// node's allocatable), serving on the node's address with the serving certificate the mode says
// (serving.go; a joining machine's nodes serve self-signed: it has no key of the cluster's CA), and
// checking callers against the API server (webhook authentication and authorisation).
func kubeletConfig(nd, ip, caFile, serving string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: false
failCgroupV1: false
cgroupsPerQOS: true
cgroupRoot: /
enforceNodeAllocatable: []
cgroupDriver: cgroupfs
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%[1]s/cri.sock
podLogsDir: %[1]s/logs
%[4]s# Pods resolve through CoreDNS behind kube-dns (action_clusterdns.go); dnsPolicy Default pods, CoreDNS
# itself among them, get the node's resolv.conf, which names no server out of reach (nodeResolvConf).
clusterDNS: [%[7]s]
clusterDomain: %[8]s
resolvConf: %[1]s/resolv.conf
# A kubelet sends about nine requests a pod it starts (status, events, its token request); at its default
# 50 a second (burst 100) 100 pods a node took seconds to be seen Ready after they ran. The API server
# is the cluster's own, on this machine (harness/README.md, "Pod throughput").
kubeAPIQPS: %[5]d
kubeAPIBurst: %[6]d
# The machine's disk and memory are shared by every node: the default thresholds (10%% disk free) would
# put DiskPressure on all of them at once on a full disk.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s}
authorization: {mode: Webhook}
`, nd, ip, caFile, servingKubeletConfig(serving, nd), controlPlaneQPS, 2*controlPlaneQPS, dnsIP, dnsDomain)
}
