package cluster

// controlPlaneNetwork makes the control-plane namespace with the bridge every node's veth joins.
type controlPlaneNetwork struct{}

func (controlPlaneNetwork) Name() string { return "make the control-plane network namespace" }

func (controlPlaneNetwork) Execute(c *actionContext) error {
	c.cpNS = c.st.Prefix + "-cp"
	c.hubAddr = cpAddr
	if err := c.st.addNetns(c.cpNS); err != nil {
		return err
	}
	cmds := [][]string{
		{"netns", "add", c.cpNS},
		{"-n", c.cpNS, "link", "set", "lo", "up"},
		{"-n", c.cpNS, "link", "add", bridgeName, "type", "bridge"},
		{"-n", c.cpNS, "addr", "add", c.hubAddr + "/24", "dev", bridgeName},
		{"-n", c.cpNS, "link", "set", bridgeName, "up"},
	}
	if err := ipCmds(cmds); err != nil {
		return err
	}
	c.step("control-plane network namespace %s: bridge %s %s/24", c.cpNS, bridgeName, c.hubAddr)
	return nil
}
