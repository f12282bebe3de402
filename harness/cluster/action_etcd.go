package cluster

// etcd starts etcd v3.6.16 in the control-plane namespace, on its loopback only.
type etcd struct{}

func (etcd) Name() string { return "start etcd" }

func (etcd) Execute(c *actionContext) error {
	etcdArgs := []string{
		"--name", "plugsim", "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "plugsim=http://127.0.0.1:2380",
		// A throw-away cluster: losing the last writes in a power cut costs nothing, and fsync on a busy
		// disk costs the API server seconds.
		"--unsafe-no-fsync", "--log-level", "warn",
	}
	if _, err := c.startProc("etcd", c.cpNS, c.bin("etcd"), c.withExtra("etcd", etcdArgs)); err != nil {
		return err
	}
	if err := c.wait("etcd's /health", func() (bool, string) {
		conn, err := dialIn(c.ctx, nsPath(c.cpNS), "127.0.0.1:2379")
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}); err != nil {
		return err
	}
	c.step("etcd v3.6.16 serving on %s in %s", etcdURL, c.cpNS)
	return nil
}
