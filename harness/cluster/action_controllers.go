package cluster

import (
	"strconv"
)

// controlPlaneQPS is the client rate limit `up` gives the controller-manager, the scheduler and the
// kubelets (twice it as the burst): the measured limiter of pod throughput at their defaults (20, 50 and
// 50 requests a second).
const controlPlaneQPS = 200

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
		// Its clients' rate limit (20 requests/s, burst 30 by default) paces the ReplicaSet controller's
		// pod creations: 300 replicas took 14 s to create with it, 3 s with this (harness/README.md,
		// "Pod throughput"). The API server is the cluster's own, on the same machine.
		"--kube-api-qps", strconv.Itoa(controlPlaneQPS), "--kube-api-burst", strconv.Itoa(2 * controlPlaneQPS),
	}
	if _, err := c.startProc("kube-controller-manager", c.cpNS, c.bin("kube"), c.withExtra("kube-controller-manager", cmArgs)); err != nil {
		return err
	}
	schedKC := c.path("kubeconfigs", "scheduler.kubeconfig")
	schedArgs := []string{"kube-scheduler",
		"--kubeconfig", schedKC, "--authentication-kubeconfig", schedKC, "--authorization-kubeconfig", schedKC,
		"--bind-address", "127.0.0.1", "--leader-elect=false",
		// Its default, 50/s (burst 100), binds at most about 25 pods a second (a binding and an event
		// each).
		"--kube-api-qps", strconv.Itoa(controlPlaneQPS), "--kube-api-burst", strconv.Itoa(2 * controlPlaneQPS),
	}
	if _, err := c.startProc("kube-scheduler", c.cpNS, c.bin("kube"), c.withExtra("kube-scheduler", schedArgs)); err != nil {
		return err
	}
	c.step("kube-controller-manager and kube-scheduler started")

	return nil
}
