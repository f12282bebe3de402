package cluster

import (
	"strconv"
)

// controllers starts kube-controller-manager (every controller, node CIDRs allocated from clusterCIDR,
// CSRs signed with the cluster's CA) and kube-scheduler in the control-plane namespace.
type controllers struct{}

func (controllers) Name() string { return "start kube-controller-manager and kube-scheduler" }

func (controllers) Execute(c *actionContext) error {
	pki := func(f string) string { return c.path("pki", f) }
	cmKC := c.path("kubeconfigs", "controller-manager.kubeconfig")
	cmArgs := []string{"kube-controller-manager",
		"--kubeconfig", cmKC, "--authentication-kubeconfig", cmKC, "--authorization-kubeconfig", cmKC,
		"--bind-address", "127.0.0.1",
		"--allocate-node-cidrs=true", "--cluster-cidr", clusterCIDR, "--node-cidr-mask-size", strconv.Itoa(nodeMask),
		"--service-cluster-ip-range", serviceCIDR,
		"--root-ca-file", pki("ca.crt"),
		"--service-account-private-key-file", pki("sa.key"), "--use-service-account-credentials=true",
		"--cluster-signing-cert-file", pki("ca.crt"), "--cluster-signing-key-file", pki("ca.key"),
		"--leader-elect=false", "--controllers", "*", "--cluster-name", "plugsim",
	}
	if _, err := c.startProc("kube-controller-manager", c.cpNS, c.bin("kube"), cmArgs); err != nil {
		return err
	}
	schedKC := c.path("kubeconfigs", "scheduler.kubeconfig")
	schedArgs := []string{"kube-scheduler",
		"--kubeconfig", schedKC, "--authentication-kubeconfig", schedKC, "--authorization-kubeconfig", schedKC,
		"--bind-address", "127.0.0.1", "--leader-elect=false",
	}
	if _, err := c.startProc("kube-scheduler", c.cpNS, c.bin("kube"), schedArgs); err != nil {
		return err
	}
	c.step("kube-controller-manager and kube-scheduler started")

	return nil
}
