package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/harness/cluster"
	"github.com/plugsim/plugsim/harness/ui"
)

func cmdCluster(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: harness cluster up|join|down|restart-kubelet [flags] (harness cluster up --help)")
	}
	switch args[0] {
	case "up":
		return cmdClusterUp(args[1:])
	case "join":
		return cmdClusterJoin(args[1:])
	case "down":
		return cmdClusterDown(args[1:])
	case "restart-kubelet":
		return cmdClusterRestartKubelet(args[1:])
	case "relay":
		return cmdClusterRelay(args[1:])
	}
	return fmt.Errorf("unknown cluster command %q: up, join, down or restart-kubelet", args[0])
}

func cmdClusterUp(args []string) error {
	fs := newFlags("cluster up", "[--nodes N] [--dir DIR] [flags]", `Starts a Kubernetes cluster on plugsim's fakes, as root, with no container runtime: etcd v3.6.16 and
kube-apiserver, kube-controller-manager, kube-scheduler v1.37.2 in a control-plane network namespace,
and N nodes, each a network namespace of its own holding a real kubelet v1.37.2, kube-proxy v1.37.2
(iptables mode: Services) and cri-fake (real pod network namespaces, the cni-fake → portmap chain with
the node's podCIDR; program images under the real runc).
The CSI driver is deployed as pods in namespace plugsim-csi (examples/csi/controller.yaml, node.yaml):
csi-fake's controller plugin with the real sidecars in one Deployment, snapshot-controller, and the node
plugins of csi.plugsim.dev and the ephemeral-only csi.ephemeral.plugsim.dev as DaemonSets; its storage is
network-attached, so a PVC's volume follows its pod to any node. Every address is in
198.18.0.0/15 and no namespace is linked to the host's; kubectl reaches the API server through a relay
on the host's 127.0.0.1. It returns once every node is Ready and the CSI pods run, leaving the cluster running; DIR keeps
the kubeconfig, certificates, logs and each node's files. Stop it with 'harness cluster down --dir DIR'.
With --ui 127.0.0.1:PORT it then stays in the foreground serving the live boundary view of every
node's fakes (see 'harness ui --help') until interrupted; the cluster stays up.
`)
	dir := fs.String("dir", defaultDir("cluster"), "directory for the cluster's state, certificates, logs and nodes (new, empty, or a cluster's from before; one only root can write, made 0700 when new)")
	nodes := fs.Int("nodes", 1, fmt.Sprintf("how many nodes (1 to %d)", cluster.MaxNodes))
	port := fs.Int("port", 0, "the API server's port on the host's 127.0.0.1 (through the relay); 0 picks a free one")
	binDir := fs.String("bin-dir", "", "directory holding etcd, kube, kubectl, kubelet, cri-fake, csi-fake, cni-fake, portmap (default $PLUGSIM_BIN, or beside the harness binary)")
	emptyCNI := fs.Bool("empty-cni", false, "start the nodes with an empty CNI conf dir: NotReady (cni plugin not initialized) until DIR/nodes/NODE/cni/plugsim.conflist is copied into DIR/nodes/NODE/cni/net.d")
	catalog := fs.String("image-catalog", "", "a cri-fake image catalog (YAML, see cri-fake/README.md) copied to DIR/image-catalog.yaml, which every node's cri-fake reads at start (--image-catalog) over its built-in images")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up (and stop everything) when the cluster is not up within this")
	serving := fs.String("kubelet-serving-certs", cluster.ServingSelfSigned, fmt.Sprintf(`where each kubelet's serving certificate (port 10250) comes from:
%s: each kubelet makes its own for its host name, no IP SAN (kubeadm's default; a client checking it by
  the node's address fails with "x509: ... doesn't contain any IP SANs"; the API server does not check it);
%s: serverTLSBootstrap: true, a CSR per kubelet, Pending until 'kubectl certificate approve', then
  signed by the cluster's CA (no certificate served until then);
%s: up writes each kubelet one signed by the cluster's CA, with the node's address`, cluster.ServingSelfSigned, cluster.ServingBootstrap, cluster.ServingClusterCA))
	kubemark := fs.Int("kubemark-nodes", 0, "also start this many kubemark hollow nodes (hollow-node1…, label plugsim.dev/node-kind=kubemark) on the same control plane, to compare (needs bin/kubemark: make kubemark)")
	kwok := fs.Int("kwok-nodes", 0, "also start KWOK's controller and this many KWOK nodes (kwok-node1…, label plugsim.dev/node-kind=kwok), to compare (needs bin/kwok: make kwok)")
	extra := extraArgs{}
	fs.Var(extra, "extra-args", "COMPONENT=ARG: an argument appended to a component's command line (repeat it; the last of a flag given twice counts): "+
		strings.Join(cluster.ExtraArgComponents, ", ")+"; e.g. --extra-args kubelet=--kube-api-qps=100")
	uiAddr, allowRemote := uiFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var uiListener net.Listener
	if *uiAddr != "" { // before anything starts, so a bad or taken address costs nothing
		l, err := listenUI(*uiAddr, *allowRemote)
		if err != nil {
			return err
		}
		defer l.Close()
		uiListener = l
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	bin, err := toolDir(*binDir)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Ctrl-C while it starts stops what was started (the components run in sessions of their own, so
	// the terminal's interrupt does not reach them).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := cluster.Up(cluster.Options{Context: ctx, Dir: abs, Nodes: *nodes, BinDir: bin, Port: *port, EmptyCNI: *emptyCNI, ExtraArgs: extra, ImageCatalog: *catalog,
		KubemarkNodes: *kubemark, KWOKNodes: *kwok, KubeletServingCerts: *serving,
		Relay: []string{exe, "cluster", "relay"}, Out: os.Stdout, Timeout: *timeout}); err != nil {
		return err
	}
	st, err := cluster.ReadState(abs)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(bin, "kubectl")
	ready := "Ready"
	if *emptyCNI {
		ready = "registered (NotReady until a conflist is in its CNI conf dir)"
	}
	try := strings.NewReplacer("KUBECTL", kubectl, "CRICTL", filepath.Join(bin, "crictl"), "DIR", abs).Replace(`Try:
  export KUBECONFIG=DIR/kubeconfig
  KUBECTL get nodes -o wide;  KUBECTL describe node node1 | grep -A8 Conditions
  KUBECTL get csidriver;  KUBECTL get csinodes;  KUBECTL get storageclass;  KUBECTL get runtimeclass
  KUBECTL -n plugsim-csi get ds,deploy,pods -o wide    (the CSI driver's controller and node plugins)
  KUBECTL run web --image=nginx:1.27 --port 80 && KUBECTL get pods -o wide -w
  KUBECTL logs web;  KUBECTL exec web -- ls /;  KUBECTL port-forward pod/web 8080:80
  KUBECTL apply -f examples/csi/pvc-pod.yaml && KUBECTL get pvc,pv,volumeattachments
  CRICTL --runtime-endpoint unix://DIR/nodes/node1/cri.sock version    (and: info, pods, ps)
SERVING
Each node's files (kubelet config and logs, cri-fake and csi-fake traces) are in DIR/nodes/NODE, the
components' logs in DIR/logs; harness trace --cluster DIR --drop-polls --since 5m draws what crossed each boundary.
Stop it with: harness cluster down --dir DIR
Nodes from another machine (or another directory here) join it with (see harness cluster join --help):
  harness cluster join --kubeconfig DIR/kubeconfig --name m2 --subnet 2 --nodes 2 --dir /var/lib/plugsim/m2
`)
	try = strings.Replace(try, "SERVING\n", servingHint(*serving, kubectl), 1)
	fmt.Printf("\ncluster up in %s: %d node(s) %s after %.1fs; API server on https://127.0.0.1:%d (relay)\n%s",
		abs, *nodes, ready, time.Since(start).Seconds(), st.Port, try)
	if uiListener == nil {
		return nil
	}
	o, err := ui.ForCluster(abs)
	if err != nil {
		return err
	}
	fmt.Println("The view runs until Ctrl-C; the cluster stays up after it.")
	return serveUI(ctx, uiListener, o)
}

func cmdClusterJoin(args []string) error {
	fs := newFlags("cluster join", "--kubeconfig FILE [--name NAME] [--subnet M] [--nodes N] [--dir DIR]", `Starts N nodes on this machine, as root, and joins them to a cluster reached only through FILE, an admin
kubeconfig of it: another machine's 'harness cluster up' (DIR/kubeconfig), or any cluster whose API
server authenticates bootstrap tokens and whose controller-manager approves and signs kubelet client
certificates (a kubeadm cluster does both). Each node is a network namespace with a real kubelet v1.37.2,
cri-fake and the ephemeral-only csi-fake, as 'cluster up' makes them, named NAME-node1…, addressed
198.18.M.(10+i). The kubelets get their client certificates through the TLS bootstrap: 'join' creates a
bootstrap token (kube-system/bootstrap-token-ID) and the ClusterRoleBindings kubeadm's node join uses
(named plugsim:…), and the controller-manager's csrapproving controller approves their CSRs. Their pod
CIDRs are the cluster's (its controller-manager allocates them); the kubernetes Service leads their pods
to the API server. It returns once they are Ready. 'harness cluster down --dir DIR' stops them and
deletes their Node objects and the token.
What crosses machines and what does not: harness/README.md, "Nodes from other machines".
`)
	dir := fs.String("dir", defaultDir("join"), "directory for this machine's nodes: state, logs, each node's files (new, empty, or a join's from before; one only root can write, made 0700 when new)")
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig of the cluster to join (required)")
	host, _ := os.Hostname()
	name := fs.String("name", sanitizeName(host), "this machine's name: its nodes are NAME-node1, NAME-node2, … (unique in the cluster)")
	subnet := fs.Int("subnet", 1, "M: this machine's nodes are 198.18.M.(10+i) (1 to 127; each machine of a cluster needs its own)")
	nodes := fs.Int("nodes", 1, fmt.Sprintf("how many nodes (1 to %d)", cluster.MaxNodes))
	binDir := fs.String("bin-dir", "", "directory holding kubelet, cri-fake, csi-fake, cni-fake, portmap (default $PLUGSIM_BIN, or beside the harness binary)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up (and stop everything) when the nodes are not Ready within this")
	catalog := fs.String("image-catalog", "", "a cri-fake image catalog (YAML, see cri-fake/README.md) copied to DIR/image-catalog.yaml, which this machine's nodes' cri-fake reads at start over its built-in images")
	extra := extraArgs{}
	fs.Var(extra, "extra-args", "COMPONENT=ARG: an argument appended to kubelet's or cri-fake's command line (repeat it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := stateDir(*dir, "join")
	if err != nil {
		return err
	}
	kc, err := filepath.Abs(*kubeconfig)
	if err != nil || *kubeconfig == "" {
		return errors.New("--kubeconfig FILE: an admin kubeconfig of the cluster to join is required")
	}
	bin, err := toolDir(*binDir)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := cluster.Join(cluster.JoinOptions{Context: ctx, Dir: abs, Kubeconfig: kc, Nodes: *nodes, Name: *name, Subnet: *subnet,
		BinDir: bin, Relay: []string{exe, "cluster", "relay"}, ExtraArgs: extra, ImageCatalog: *catalog, Out: os.Stdout, Timeout: *timeout}); err != nil {
		return err
	}
	fmt.Printf("\n%d node(s) %s-node1… joined and Ready after %.1fs (kubectl --kubeconfig %s get nodes)\nLeave with: harness cluster down --dir %s\n",
		*nodes, *name, time.Since(start).Seconds(), kc, abs)
	return nil
}

// sanitizeName turns a host name into a node-name prefix: lower-case letters, digits and '-'.
func sanitizeName(s string) string {
	s, _, _ = strings.Cut(strings.ToLower(s), ".")
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	s = strings.Trim(string(b), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "m" + s
	}
	return s[:min(len(s), 40)]
}

func cmdClusterDown(args []string) error {
	fs := newFlags("cluster down", "[--dir DIR]", `Stops the cluster 'harness cluster up --dir DIR' started, also after a crash of 'up': its processes,
every mount under DIR, its network namespaces (and with them its veths, routes and iptables rules).
Logs and certificates stay in DIR. A second 'down' does nothing. It acts only on what is the cluster's
own: it refuses a directory another local user could have written, signals only the processes 'up'
started (their pid and start time, working in DIR), and deletes only the network namespaces named for
DIR, whatever DIR/cluster.json says.
`)
	dir := fs.String("dir", defaultDir("cluster"), "the directory given to 'harness cluster up'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: it deletes network namespaces and unmounts the kubelets' mounts")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	return cluster.Down(abs, os.Stdout)
}

// servingHint is what `up` tells about the kubelets' serving certificates when they need a step.
func servingHint(mode, kubectl string) string {
	if mode != cluster.ServingBootstrap {
		return ""
	}
	return "  " + kubectl + " get csr    (each kubelet's serving certificate waits for: " + kubectl + " certificate approve NAME)\n"
}

func cmdClusterRestartKubelet(args []string) error {
	fs := newFlags("cluster restart-kubelet", "[--dir DIR] NODE...", `Stops the kubelet of each named node and starts it again with DIR/nodes/NODE/kubelet.yaml, as
'systemctl restart kubelet' does on a kubeadm node after /var/lib/kubelet/config.yaml was edited. The
pods keep running; the new kubelet finds them again. For example, to move node1 to a serving certificate
the cluster's CA signs (the source note's cure for metrics-server's "doesn't contain any IP SANs"):
  echo 'serverTLSBootstrap: true' >> DIR/nodes/node1/kubelet.yaml
  harness cluster restart-kubelet --dir DIR node1
  kubectl get csr;  kubectl certificate approve CSR-NAME
It returns once each new kubelet answers its /healthz.
`)
	dir := fs.String("dir", defaultDir("cluster"), "the directory given to 'harness cluster up'")
	binDir := fs.String("bin-dir", "", "directory holding kubelet (default $PLUGSIM_BIN, or beside the harness binary)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up when a kubelet does not answer /healthz within this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	bin, err := toolDir(*binDir)
	if err != nil {
		return err
	}
	return cluster.RestartKubelet(abs, bin, fs.Args(), os.Stdout, *timeout)
}

// cmdClusterRelay is the relay process `up` starts (not for users): it serves the listening socket it
// inherits as fd 3.
func cmdClusterRelay(args []string) error {
	fs := flag.NewFlagSet("harness cluster relay", flag.ContinueOnError)
	fs.String("dir", "", "the cluster's directory (names the process for 'down')")
	netns := fs.String("netns", "", "the network namespace to dial in (none: its own)")
	target := fs.String("target", "", "host:port to dial there")
	listeners := fs.Int("listeners", 1, "how many listening sockets it inherits, as fds 3, 4, …")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	errs := make(chan error, *listeners)
	for i := range *listeners {
		ln, err := net.FileListener(os.NewFile(uintptr(3+i), "listener"))
		if err != nil {
			return fmt.Errorf("the listening socket (fd %d): %w", 3+i, err)
		}
		go func() { errs <- cluster.Relay(ln, *netns, *target, logger) }()
	}
	return <-errs
}

// toolDir is --bin-dir, else $PLUGSIM_BIN, else the harness binary's own directory.
func toolDir(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		d = os.Getenv("PLUGSIM_BIN")
	}
	if d == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		d = filepath.Dir(exe)
	}
	return filepath.Abs(d)
}

// extraArgs is the repeatable --extra-args COMPONENT=ARG flag.
type extraArgs map[string][]string

func (e extraArgs) String() string { return "" }

func (e extraArgs) Set(v string) error {
	name, arg, ok := strings.Cut(v, "=")
	if !ok || name == "" || arg == "" {
		return fmt.Errorf("want COMPONENT=ARG (kubelet=--kube-api-qps=100), got %q", v)
	}
	e[name] = append(e[name], arg)
	return nil
}
