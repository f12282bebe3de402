package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plugsim/plugsim/harness/cluster/nodens"
	"github.com/plugsim/plugsim/internal/atomicfile"
	"github.com/plugsim/plugsim/internal/statedir"
)

// ExtraArgComponents are the components Options.ExtraArgs may name.
var ExtraArgComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "cri-fake", "kubemark", "kwok"}

// Options say what `up` starts.
type Options struct {
	Dir    string // the cluster's directory (absolute): state, certificates, logs, every node's files
	Nodes  int
	BinDir string // etcd, kube, kubectl, kubelet, cri-fake, csi-fake, cni-fake, portmap, runc, programs/ (see required)
	Port   int    // the relay's port on the host's 127.0.0.1; 0 picks a free one
	// EmptyCNI starts every node with an empty CNI conf dir: its kubelet registers and stays NotReady
	// ("cni plugin not initialized") until a conflist is put there (each node's cni/plugsim.conflist is the
	// one `up` would have put). `up` then waits for registration only.
	EmptyCNI bool
	// KubeletServingCerts says where each kubelet's serving certificate (port 10250) comes from; ""
	// means ServingSelfSigned, kubeadm's default. See ServingSelfSigned, ServingBootstrap, ServingClusterCA.
	KubeletServingCerts string
	// ImageCatalog is a cri-fake image catalog (YAML, cri-fake/README.md) for every node, merged over
	// cri-fake's built-in images; "" gives DIR/image-catalog.yaml with no images of its own.
	ImageCatalog string
	// Relay is the command that runs the relay: the harness binary and its arguments before the relay's
	// own flags (for `harness cluster relay`: [harness, cluster, relay]).
	Relay []string
	// KubemarkNodes and KWOKNodes start that many nodes of each kind beside plugsim's, on the same
	// control plane, to compare them (make bench-cluster): kubemark's hollow nodes (the real kubelet
	// code on the upstream fake runtime; bin/kubemark, `make kubemark`) and KWOK's (no kubelet: its
	// controller writes the nodes' and pods' status; bin/kwok and bin/kwok-stages, `make kwok`).
	KubemarkNodes, KWOKNodes int
	// ExtraArgs are command-line arguments appended to a component's own, by component: etcd,
	// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, cri-fake (kind's
	// extraArgs). An argument given twice counts the last time, so these override `up`'s.
	ExtraArgs map[string][]string
	Out       io.Writer     // progress
	Timeout   time.Duration // for the whole start; 0 means 5 minutes
	// Context, when set, cancels the start (an interrupt of `up`): Up then stops what it started.
	Context context.Context
}

// required lists the binaries `up` runs (and the program images' binaries, in BinDir/programs, cri-fake's
// program directory) and the make target that builds each.
var required = map[string]string{
	"etcd": "make control-plane", "kube": "make control-plane", "kubectl": "make control-plane", "kube-proxy": "make control-plane",
	"kubelet": "make kubelet", "cri-fake": "make build", "csi-fake": "make build", "cni-fake": "make build",
	"portmap": "make tools", "runc": "make runc",
	// The CSI driver's pods (examples/csi/controller.yaml, node.yaml) and the CRDs of its snapshots.
	"programs/csi-fake": "make sidecars", "programs/csi-provisioner": "make sidecars", "programs/csi-attacher": "make sidecars",
	"programs/csi-resizer": "make sidecars", "programs/csi-snapshotter": "make sidecars",
	"programs/snapshot-controller": "make sidecars", "snapshot-crds": "make sidecars",
}

// Up starts the cluster and returns when every node is Ready (or, with EmptyCNI, registered). On failure
// it stops what it started, keeping the logs in DIR/logs, and returns an error naming the failing step.
func Up(o Options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, a bridge and veths, the kubelets mount their volumes, portmap writes iptables rules (run it with sudo)")
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: between 1 and %d", o.Nodes, MaxNodes)
	}
	// Every node takes a pod CIDR of clusterCIDR's 256, and plugsim's and kubemark's an address.
	if o.KubemarkNodes < 0 || o.KWOKNodes < 0 || o.Nodes+o.KubemarkNodes+o.KWOKNodes > MaxNodes {
		return fmt.Errorf("--nodes %d, --kubemark-nodes %d, --kwok-nodes %d: at most %d nodes in all", o.Nodes, o.KubemarkNodes, o.KWOKNodes, MaxNodes)
	}
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("the directory must be absolute: %q", o.Dir)
	}
	// Checked (made 0700 when new) before anything reads its state or acts on it: a directory another
	// local user made or could change is refused, naming its owner and mode.
	if err := statedir.Prepare(o.Dir, Skip...); err != nil {
		return err
	}
	// A unix socket path has at most 107 bytes; the deepest is each node's registration socket of the
	// ephemeral-only driver (kubelet/plugins/<driver>/csi.sock is 9 bytes shorter).
	if deepest := filepath.Join(o.Dir, "nodes", nodeName(o.Nodes), "kubelet/plugins_registry", ephemeralDriver+"-reg.sock"); len(deepest) > 107 {
		return fmt.Errorf("--dir %s is too long: the socket %s would pass the 107-byte limit of a unix socket path", o.Dir, deepest)
	}
	switch o.KubeletServingCerts {
	case "":
		o.KubeletServingCerts = ServingSelfSigned
	case ServingSelfSigned, ServingBootstrap, ServingClusterCA:
	default:
		return fmt.Errorf("--kubelet-serving-certs %q: one of %s, %s, %s", o.KubeletServingCerts, ServingSelfSigned, ServingBootstrap, ServingClusterCA)
	}
	if err := CheckInotify(o.Nodes, o.KubemarkNodes); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	for name := range o.ExtraArgs {
		if !slices.Contains(ExtraArgComponents, name) {
			return fmt.Errorf("--extra-args %s=…: no such component; the components are %s", name, strings.Join(ExtraArgComponents, ", "))
		}
	}
	need := maps.Clone(required)
	if o.KubemarkNodes > 0 {
		need["kubemark"] = "make kubemark"
	}
	if o.KWOKNodes > 0 {
		need["kwok"] = "make kwok"
	}
	for name, target := range need {
		if fi, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: build it with `%s` (or point --bin-dir at it)", filepath.Join(o.BinDir, name), target)
		}
	}
	if o.KWOKNodes > 0 {
		if stages, _ := filepath.Glob(filepath.Join(o.BinDir, "kwok-stages", "*.yaml")); len(stages) == 0 {
			return fmt.Errorf("%s holds no KWOK stages: `make kwok` copies them there", filepath.Join(o.BinDir, "kwok-stages"))
		}
	}
	// portmap and the kubernetes Service's rules need iptables in each node's namespace.
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("iptables is missing: install it (`make deps` does, as root: apt-get install iptables)")
	}
	if err := prepareDir(o.Dir); err != nil {
		return err
	}
	c := &actionContext{o: o, st: &State{Dir: o.Dir, Prefix: PrefixFor(o.Dir)}, start: time.Now(), exited: make(chan string, 64)}
	if err := c.st.save(); err != nil {
		return err
	}
	return c.runAll(o.Context, upActions(o))
}

// prepareDir makes DIR, or clears it when it is a cluster's left from before; any other non-empty
// directory is refused, so `up` never deletes a user's files.
func prepareDir(dir string) error {
	st, err := ReadState(dir)
	switch {
	case err == nil:
		for _, p := range st.Procs {
			if p.ours(dir) == nil {
				return fmt.Errorf("a cluster is up in %s (%s, pid %d): stop it with `harness cluster down --dir %s`", dir, p.Name, p.PID, dir)
			}
		}
		// A crashed `up` or a killed cluster: take away what is left first.
		if err := Down(dir, io.Discard); err != nil {
			return fmt.Errorf("clearing what the cluster before left in %s: %w", dir, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
			return fmt.Errorf("%s is not empty and holds no cluster: give `--dir` a new or empty directory", dir)
		}
		if m := nodens.MountsUnder(dir); len(m) > 0 {
			return fmt.Errorf("%s still has mounts (%s): run `harness cluster down --dir %s`", dir, m[0], dir)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"pki", "kubeconfigs", "logs", "etcd", "manifests", "csi/controller", "csi/state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return atomicfile.Write(filepath.Join(dir, markerFile), []byte("a plugsim cluster: harness cluster up/down own this directory\n"), 0o644)
}
