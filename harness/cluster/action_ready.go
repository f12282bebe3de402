package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// waitReady waits until every node is Ready: its kubelet registered, its CNI configuration found by
// cri-fake, its status posted.
type waitReady struct{}

func (waitReady) Name() string { return "wait for the nodes to be Ready" }

func (waitReady) Execute(c *actionContext) error {
	return c.waitNodes("Ready", func(n *corev1.Node) bool { return nodeReady(n) })
}

// waitNodes waits until every node this run started is in the API and satisfies cond (a joined
// cluster has others, which are not waited for).
func (c *actionContext) waitNodes(what string, cond func(*corev1.Node) bool) error {
	ours := map[string]bool{}
	c.st.mu.Lock()
	for _, n := range c.st.Nodes {
		ours[n.Name] = true
	}
	c.st.mu.Unlock()
	err := c.wait(fmt.Sprintf("%d node(s) %s", len(ours), what), func() (bool, string) {
		var list corev1.NodeList
		if _, err := c.get("/api/v1/nodes", &list); err != nil {
			return false, err.Error()
		}
		ok := 0
		var desc []string
		for i := range list.Items {
			n := &list.Items[i]
			if !ours[n.Name] {
				continue
			}
			if cond(n) {
				ok++
			}
			desc = append(desc, n.Name+": "+readyMessage(n))
		}
		return ok == len(ours), fmt.Sprintf("%d of %d: %s", ok, len(ours), strings.Join(desc, "; "))
	})
	if err == nil {
		c.step("%d node(s) %s", len(ours), what)
	}
	return err
}

func nodeReady(n *corev1.Node) bool {
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			return cd.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readyMessage(n *corev1.Node) string {
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			return string(cd.Status) + " " + cd.Message
		}
	}
	return "no Ready condition yet"
}
