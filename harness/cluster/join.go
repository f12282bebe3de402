package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plugsim/plugsim/internal/statedir"
)

// JoinOptions say what `join` starts: nodes on this machine that join a cluster running elsewhere.
type JoinOptions struct {
	Dir        string // this machine's directory for the joined nodes (absolute): state, logs, each node's files
	Kubeconfig string // an admin kubeconfig of the cluster to join: the only way `join` reaches it
	Nodes      int
	// Name names this machine's nodes NAME-node1, NAME-node2, …: unique in the cluster.
	Name string
	// Subnet is M in the nodes' addresses 198.18.M.(10+i) (1 to 127); the first machine's nodes are
	// 198.18.0.(10+i), so every machine of a cluster takes a subnet of its own.
	Subnet    int
	BinDir    string // kubelet, cri-fake, csi-fake, cni-fake, portmap
	Relay     []string
	ExtraArgs map[string][]string // as Options.ExtraArgs: kubelet, cri-fake
	// ImageCatalog is as Options.ImageCatalog, for this machine's nodes.
	ImageCatalog string
	Out          io.Writer
	Timeout      time.Duration // 0 means 5 minutes
	Context      context.Context
}

// joinRequired lists the binaries `join` runs and the make target that builds each.
var joinRequired = map[string]string{
	"kubelet": "make kubelet", "cri-fake": "make build", "csi-fake": "make build", "cni-fake": "make build",
	"portmap": "make tools",
}

// Join starts o.Nodes nodes on this machine and registers them with the cluster o.Kubeconfig reaches,
// through the kubelet's TLS bootstrap, and returns when they are Ready. On failure it stops what it
// started (and deletes the Node objects its kubelets registered), keeping the logs in DIR/logs.
func Join(o JoinOptions) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, a bridge and veths, the kubelets mount their volumes, portmap writes iptables rules (run it with sudo)")
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: between 1 and %d", o.Nodes, MaxNodes)
	}
	if o.Subnet < 1 || o.Subnet > 127 {
		return fmt.Errorf("--subnet %d: between 1 and 127 (198.18.0.0/24 is the first machine's, 198.18.128.0/17 the Services')", o.Subnet)
	}
	if !validNodePrefix(o.Name) {
		return fmt.Errorf("--name %q: lower-case letters, digits and '-', starting with a letter, at most 40 (it names the nodes NAME-node1…)", o.Name)
	}
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("the directory must be absolute: %q", o.Dir)
	}
	if o.Kubeconfig == "" {
		return errors.New("--kubeconfig: the cluster to join is reached only through an admin kubeconfig of it")
	}
	for name := range o.ExtraArgs {
		if name != "kubelet" && name != "cri-fake" {
			return fmt.Errorf("--extra-args %s=…: a joining machine runs only kubelet and cri-fake (and csi-fake)", name)
		}
	}
	if deepest := filepath.Join(o.Dir, "nodes", o.Name+"-"+nodeName(o.Nodes), "kubelet/plugins_registry", ephemeralDriver+"-reg.sock"); len(deepest) > 107 {
		return fmt.Errorf("--dir %s is too long: the socket %s would pass the 107-byte limit of a unix socket path", o.Dir, deepest)
	}
	if err := checkInotifyNodes(o.Nodes, 0, 0); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	for name, target := range joinRequired {
		if fi, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: build it with `%s` (or point --bin-dir at it)", filepath.Join(o.BinDir, name), target)
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("iptables is missing: install it (`make deps` does, as root: apt-get install iptables)")
	}
	// As up: checked (made 0700 when new) before anything reads its state or acts on it.
	if err := statedir.Prepare(o.Dir, Skip...); err != nil {
		return err
	}
	if err := prepareDir(o.Dir); err != nil {
		return err
	}
	uo := Options{Dir: o.Dir, Nodes: o.Nodes, BinDir: o.BinDir, Relay: o.Relay, ExtraArgs: o.ExtraArgs, ImageCatalog: o.ImageCatalog, Out: o.Out, Timeout: o.Timeout, Context: o.Context}
	c := &actionContext{o: uo, st: &State{Dir: o.Dir, Prefix: PrefixFor(o.Dir)}, start: time.Now(), exited: make(chan string, 64),
		join: &joinContext{name: o.Name, subnet: o.Subnet, kubeconfig: o.Kubeconfig}}
	if err := c.st.save(); err != nil {
		return err
	}
	return c.runAll(o.Context, joinActions())
}

// joinActions is the list `join` runs, in order (see actions.go).
func joinActions() []action {
	return []action{
		reachCluster{},   // action_join_cluster.go: the admin kubeconfig, the cluster's CA and Service address
		bootstrapToken{}, // action_join_bootstrap.go: a bootstrap token and the RBAC kubeadm's node TLS bootstrap uses
		imageCatalog{},   // action_catalog.go: DIR/image-catalog.yaml, which every node's cri-fake here reads
		joinNetwork{},    // action_join_network.go: this machine's hub namespace and bridge
		joinNodes{},      // action_join_nodes.go: per node a namespace, cri-fake and the ephemeral CSI driver
		joinRelay{},      // action_join_relay.go: the API server's address inside every node, carried to the real one
		joinKubelets{},   // action_join_nodes.go: the kubelets, bootstrapping their client certificates
		podNetwork{},     // action_podnetwork.go: pod CIDRs the cluster allocated, conflists, routes between this machine's nodes
		joinService{},    // action_join_service.go: the cluster's kubernetes Service address leads to its API server
		waitReady{},      // action_ready.go
	}
}

// joinContext is what `join` learnt of the cluster it joins.
type joinContext struct {
	name       string // the machine's name: its nodes are NAME-nodeI
	subnet     int    // M: its nodes are 198.18.M.(10+i)
	kubeconfig string // the admin kubeconfig given
	apiAddr    string // host:port of the API server, as the kubeconfig names it (an address, resolved)
	caPEM      []byte // the cluster's CA
	serviceIP  string // the kubernetes Service's cluster IP
}

// subnetIP is 198.18.M.host.
func subnetIP(m, host int) string { return fmt.Sprintf("198.18.%d.%d", m, host) }

// validNodePrefix reports whether s can prefix node names (DNS labels) and network namespace names.
func validNodePrefix(s string) bool {
	if s == "" || len(s) > 40 || s[0] < 'a' || s[0] > 'z' || strings.HasSuffix(s, "-") {
		return false
	}
	return !slices.ContainsFunc([]byte(s), func(b byte) bool {
		return !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-')
	})
}
