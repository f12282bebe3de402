package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kwokNodes starts KWOK's controller (sigs.k8s.io/kwok v0.8.0, cmd/kwok) in the control-plane namespace
// and creates its Node objects beside plugsim's, to compare them on one control plane (make
// bench-cluster). KWOK runs no kubelet: its controller plays Stages (kwok's own node-fast,
// node-heartbeat-with-lease and pod-fast, copied from its module into bin/kwok-stages by `make kwok`)
// that write the nodes' and pods' status, and renews the nodes' Leases. A pod on a KWOK node is Ready
// as soon as its stage is played: no runtime, no network, no volumes, no probes, no logs or exec.
type kwokNodes struct{}

func (kwokNodes) Name() string { return "start KWOK and its nodes" }

// kwokAnnotation is the annotation of the nodes KWOK manages (its --manage-nodes-with-annotation-selector).
const kwokAnnotation = "kwok.x-k8s.io/node"

func (kwokNodes) Execute(c *actionContext) error {
	kp, err := c.ca.issue(certSpec{cn: "plugsim:kwok", groups: []string{"system:masters"}, client: true})
	if err != nil {
		return err
	}
	kc := c.path("kubeconfigs", "kwok.kubeconfig")
	if err := os.WriteFile(kc, kubeconfig(fmt.Sprintf("https://127.0.0.1:%d", apiPort), c.ca.pem, "plugsim:kwok", kp), 0o600); err != nil {
		return err
	}
	stages, _ := filepath.Glob(c.bin("kwok-stages/*.yaml"))
	args := []string{"--kubeconfig=" + kc, "--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
		"--node-lease-duration-seconds=40", "--config=" + strings.Join(stages, ",")}
	if _, err := c.startProc("kwok", c.cpNS, c.bin("kwok"), append(args, c.o.ExtraArgs["kwok"]...)); err != nil {
		return err
	}
	var manifest strings.Builder
	for i := 1; i <= c.o.KWOKNodes; i++ {
		name := fmt.Sprintf("kwok-node%d", i)
		c.st.mu.Lock()
		c.st.Nodes = append(c.st.Nodes, Node{Name: name, Kind: KindKWOK})
		c.st.mu.Unlock()
		// As KWOK's documentation creates its nodes: the annotation it manages them by, and what they
		// offer (110 pods, a kubelet's default, and this machine's CPUs and memory).
		fmt.Fprintf(&manifest, `---
apiVersion: v1
kind: Node
metadata:
  name: %[1]s
  annotations: {%[2]s: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: %[1]s, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok, %[3]s: %[4]s}
status:
  allocatable: {cpu: "2", memory: 24Gi, pods: "110"}
  capacity: {cpu: "2", memory: 24Gi, pods: "110"}
`, name, kwokAnnotation, NodeKindLabel, KindKWOK)
	}
	if err := c.st.save(); err != nil {
		return err
	}
	if err := c.apply("kwok-nodes.yaml", []byte(manifest.String())); err != nil {
		return err
	}
	c.step("KWOK v0.8.0 controller started; %d node(s) kwok-node1… created", c.o.KWOKNodes)
	return nil
}
