package cluster

import (
	"fmt"
	"os/exec"
	"strings"
)

// joinService makes the cluster's `kubernetes` Service address (its cluster IP, port 443) lead to the API
// server from this machine's nodes and their pods: in each node's namespace, a chain PLUGSIM-KUBERNETES in
// the nat table, jumped to from PREROUTING (pods) and OUTPUT (host-network pods, the node itself), DNATs
// it to the relay's listener in the hub namespace, which carries it to the API server. No kube-proxy runs
// on a joining machine (the first machine's nodes run one each): this is the one Service its nodes serve.
// The rules live in the nodes' namespaces, so `down` removes them with them.
type joinService struct{}

func (joinService) Name() string { return "route the kubernetes Service to the API server" }

const kubernetesChain = "PLUGSIM-KUBERNETES"

func (joinService) Execute(c *actionContext) error {
	c.st.mu.Lock()
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	dest := fmt.Sprintf("%s:%d", c.hubAddr, apiPort)
	for _, n := range nodes {
		for _, args := range [][]string{
			{"-t", "nat", "-N", kubernetesChain},
			{"-t", "nat", "-A", kubernetesChain, "-d", c.join.serviceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", dest},
			{"-t", "nat", "-A", "PREROUTING", "-j", kubernetesChain},
			{"-t", "nat", "-A", "OUTPUT", "-j", kubernetesChain},
		} {
			cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(n.Netns), "--", "iptables", "-w"}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: iptables %s: %v: %s", n.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
		}
	}
	c.step("kubernetes Service %s:443 → the relay %s on %d node(s)", c.join.serviceIP, dest, len(nodes))
	return nil
}
