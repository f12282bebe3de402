package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// kubemarkNodes starts kubemark's hollow nodes beside plugsim's, to compare them on one control plane
// (make bench-cluster): each `kubemark --morph=kubelet` of k8s.io/kubernetes v1.37.2 (cmd/kubemark), the
// real kubelet code (kubeletapp.RunKubelet) on the upstream fake runtime (k8s.io/cri-client/pkg/fake),
// with a fake cAdvisor, a stub container manager, a fake mounter and no probes
// (pkg/kubemark/hollow_kubelet.go): no CNI, no volumes beyond what the fake mounter pretends, no logs
// or exec. Each runs in a network namespace of its own on the cluster's bridge, as a plugsim node does,
// with a client certificate of system:node:hollow-nodeI; its kubelet root directory is under its node
// directory. Beside it runs kubemark's hollow kube-proxy (`--morph=proxy`: the real proxy's watches of
// Services and EndpointSlices over a fake iptables), as kubemark's hollow node pairs them, since plugsim's
// nodes run the real kube-proxy.
type kubemarkNodes struct{}

func (kubemarkNodes) Name() string { return "start the kubemark hollow nodes" }

func (kubemarkNodes) Execute(c *actionContext) error {
	for i := 1; i <= c.o.KubemarkNodes; i++ {
		name, ip := fmt.Sprintf("hollow-node%d", i), nodeIP(c.o.Nodes+i)
		netns, err := nodeNamespace(c, name, ip)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c.st.mu.Lock()
		c.st.Nodes[len(c.st.Nodes)-1].Kind = KindKubemark
		c.st.mu.Unlock()
		nd := c.path("nodes", name)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return err
		}
		client, err := c.ca.issue(certSpec{cn: "system:node:" + name, groups: []string{"system:nodes"}, client: true})
		if err != nil {
			return err
		}
		inside := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
		kc := filepath.Join(nd, "kubelet.kubeconfig")
		if err := os.WriteFile(kc, kubeconfig(inside, c.ca.pem, "system:node:"+name, client), 0o600); err != nil {
			return err
		}
		// The hollow kubelet makes its root directory with os.MkdirTemp: TMPDIR puts it in the node's
		// directory, which `down` unmounts and keeps. Its client's rate limit is plugsim's kubelets'
		// (kubemark's own default is 10 requests a second, burst 20), so the two kinds compare on
		// what they run rather than on how fast they may talk; --extra-args kubemark=… overrides it.
		args := append([]string{"TMPDIR=" + nd, c.bin("kubemark"),
			"--kube-api-qps=" + strconv.Itoa(controlPlaneQPS), "--kube-api-burst=" + strconv.Itoa(2*controlPlaneQPS),
			"--morph=kubelet", "--name=" + name, "--kubeconfig=" + kc,
			"--kubelet-port=10250", "--kubelet-read-only-port=0",
			// The upstream fake's image service, not a containerd the machine does not run.
			"--use-host-image-service=false",
			"--max-pods=110", "--node-labels=" + NodeKindLabel + "=" + KindKubemark,
		}, c.o.ExtraArgs["kubemark"]...)
		if _, err := c.startProc(name+"-kubelet", netns, "/usr/bin/env", args); err != nil {
			return err
		}
		proxy, err := c.ca.issue(certSpec{cn: "system:kube-proxy", client: true})
		if err != nil {
			return err
		}
		pkc := filepath.Join(nd, "kube-proxy.kubeconfig")
		if err := os.WriteFile(pkc, kubeconfig(inside, c.ca.pem, "system:kube-proxy", proxy), 0o600); err != nil {
			return err
		}
		if _, err := c.startProc(name+"-proxy", netns, c.bin("kubemark"), append([]string{"--morph=proxy", "--name=" + name, "--kubeconfig=" + pkc},
			c.o.ExtraArgs["kubemark"]...)); err != nil {
			return err
		}
	}
	c.step("%d kubemark hollow node(s) hollow-node1… started (kubemark --morph=kubelet and --morph=proxy v1.37.2)", c.o.KubemarkNodes)
	return nil
}
