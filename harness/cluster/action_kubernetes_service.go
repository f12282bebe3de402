package cluster

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// kubernetesService makes the `kubernetes` Service's address (serviceIP:443) lead to the API server
// from every node and its pods: in each node's namespace, a chain PLUGSIM-KUBERNETES in the nat table,
// jumped to from PREROUTING (pods) and OUTPUT (host-network pods, the node itself), DNATs it to
// cpAddr:apiPort, the endpoint the API server advertises. This is the one Service the cluster serves:
// every in-cluster client (kube-root-ca.crt plus the service-account token, rest.InClusterConfig)
// finds the API server there. It lives in the nodes' namespaces, so `down` removes it with them.
type kubernetesService struct{}

func (kubernetesService) Name() string { return "route the kubernetes Service to the API server" }

const kubernetesChain = "PLUGSIM-KUBERNETES"

func (kubernetesService) Execute(c *actionContext) error {
	c.st.mu.Lock()
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	// On a joining machine, the cluster's Service address, led to the relay's listener in the hub
	// namespace, which carries it to the API server.
	svc := serviceIP
	if c.join != nil {
		svc = c.join.serviceIP
	}
	dest := c.hubAddr + ":" + strconv.Itoa(apiPort)
	for _, n := range nodes {
		if err := kubernetesServiceRules(n.Netns, svc, dest); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	c.step("kubernetes Service %s:443 → API server %s on %d node(s)", svc, dest, len(nodes))
	return nil
}

func kubernetesServiceRules(netns, serviceIP, dest string) error {
	for _, args := range [][]string{
		{"-t", "nat", "-N", kubernetesChain},
		{"-t", "nat", "-A", kubernetesChain, "-d", serviceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", dest},
		{"-t", "nat", "-A", "PREROUTING", "-j", kubernetesChain},
		{"-t", "nat", "-A", "OUTPUT", "-j", kubernetesChain},
	} {
		cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(netns), "--", "iptables", "-w"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
