package cluster

// joinNetwork makes this machine's hub namespace: a bridge at 198.18.M.1/24 that every node's eth0
// joins, as the control-plane namespace's bridge does on the first machine. It forwards nothing out of
// the machine; it holds the relay's listener for the kubernetes Service (joinRelay).
type joinNetwork struct{}

func (joinNetwork) Name() string { return "make this machine's network namespace" }

func (joinNetwork) Execute(c *actionContext) error {
	c.cpNS = c.st.Prefix + "-hub"
	c.hubAddr = subnetIP(c.join.subnet, 1)
	if err := c.st.addNetns(c.cpNS); err != nil {
		return err
	}
	if err := ipCmds([][]string{
		{"netns", "add", c.cpNS},
		{"-n", c.cpNS, "link", "set", "lo", "up"},
		{"-n", c.cpNS, "link", "add", bridgeName, "type", "bridge"},
		{"-n", c.cpNS, "addr", "add", c.hubAddr + "/24", "dev", bridgeName},
		{"-n", c.cpNS, "link", "set", bridgeName, "up"},
	}); err != nil {
		return err
	}
	c.step("network namespace %s: bridge %s %s/24", c.cpNS, bridgeName, c.hubAddr)
	return nil
}
