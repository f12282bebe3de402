package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	csiexample "github.com/plugsim/plugsim/examples/csi"
)

// Options say what `up` starts.
type Options struct {
	Dir    string // the cluster's directory (absolute): state, certificates, logs, every node's files
	Nodes  int
	BinDir string // etcd, kube, kubectl, kubelet, cri-fake, csi-fake, cni-fake, portmap (and csi-* sidecars when built)
	Port   int    // the relay's port on the host's 127.0.0.1; 0 picks a free one
	// EmptyCNI starts every node with an empty CNI conf dir: its kubelet registers and stays NotReady
	// ("cni plugin not initialized") until a conflist is put there (each node's cni/plugsim.conflist is the
	// one `up` would have put). `up` then waits for registration only.
	EmptyCNI bool
	// Relay is the command that runs the relay: the harness binary and its arguments before the relay's
	// own flags (for `harness cluster relay`: [harness, cluster, relay]).
	Relay   []string
	Out     io.Writer     // progress
	Timeout time.Duration // for the whole start; 0 means 5 minutes
	// Context, when set, cancels the start (an interrupt of `up`): Up then stops what it started.
	Context context.Context
}

// required lists the binaries `up` runs and the make target that builds each.
var required = map[string]string{
	"etcd": "make control-plane", "kube": "make control-plane", "kubectl": "make control-plane",
	"kubelet": "make kubelet", "cri-fake": "make build", "csi-fake": "make build", "cni-fake": "make build",
	"portmap": "make tools",
}

// sidecars are the CSI controller sidecars `up` runs when their binaries are in BinDir (h8's build:
// bin/csi-provisioner, ...), each with its own client certificate and the RBAC of its deploy/kubernetes/rbac.yaml.
var sidecars = []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"}

// snapshotController is external-snapshotter's common controller (VolumeSnapshot → VolumeSnapshotContent),
// run with its own client certificate when it is in BinDir together with the CRDs in BinDir/snapshot-crds.
const snapshotController = "snapshot-controller"

// Up starts the cluster and returns when every node is Ready (or, with EmptyCNI, registered). On failure
// it stops what it started, keeping the logs in DIR/logs, and returns an error naming the failing step.
func Up(o Options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, a bridge and veths, the kubelets mount their volumes, portmap writes iptables rules (run it with sudo)")
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: between 1 and %d", o.Nodes, MaxNodes)
	}
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("the directory must be absolute: %q", o.Dir)
	}
	// A unix socket path has at most 107 bytes; the deepest is each node's registration socket of the
	// ephemeral-only driver (kubelet/plugins/<driver>/csi.sock is 9 bytes shorter).
	if deepest := filepath.Join(o.Dir, "nodes", nodeName(o.Nodes), "kubelet/plugins_registry", ephemeralDriver+"-reg.sock"); len(deepest) > 107 {
		return fmt.Errorf("--dir %s is too long: the socket %s would pass the 107-byte limit of a unix socket path", o.Dir, deepest)
	}
	if err := checkInotify(o.Nodes); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	for name, target := range required {
		if fi, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: build it with `%s` (or point --bin-dir at it)", filepath.Join(o.BinDir, name), target)
		}
	}
	if err := prepareDir(o.Dir); err != nil {
		return err
	}
	c := &upRun{o: o, st: &State{Dir: o.Dir, Prefix: PrefixFor(o.Dir)}, start: time.Now(), exited: make(chan string, 64)}
	if err := c.st.save(); err != nil {
		return err
	}
	parent := o.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, o.Timeout)
	defer cancel()
	c.ctx = ctx
	defer func() {
		if err != nil {
			fmt.Fprintf(o.Out, "cluster up failed: %v\nstopping what was started (logs stay in %s)\n", err, filepath.Join(o.Dir, "logs"))
			if derr := Down(o.Dir, o.Out); derr != nil {
				err = fmt.Errorf("%w; and stopping it: %v", err, derr)
			}
		}
	}()
	return c.run()
}

// prepareDir makes DIR, or clears it when it is a cluster's left from before; any other non-empty
// directory is refused, so `up` never deletes a user's files.
func prepareDir(dir string) error {
	if st, err := ReadState(dir); err == nil {
		for _, p := range st.Procs {
			if p.alive() {
				return fmt.Errorf("a cluster is up in %s (%s, pid %d): stop it with `harness cluster down --dir %s`", dir, p.Name, p.PID, dir)
			}
		}
		// A crashed `up` or a killed cluster: take away what is left first.
		if err := Down(dir, io.Discard); err != nil {
			return fmt.Errorf("clearing what the cluster before left in %s: %w", dir, err)
		}
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
		if m := mountsUnder(dir); len(m) > 0 {
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
	return os.WriteFile(filepath.Join(dir, markerFile), []byte("a plugsim cluster: harness cluster up/down own this directory\n"), 0o644)
}

// upRun is one `up` in progress.
type upRun struct {
	o       Options
	st      *State
	ctx     context.Context
	start   time.Time
	cpNS    string
	ca      *ca
	admin   *http.Client // to the API server through the relay, as system:masters
	server  string       // the relay's https://127.0.0.1:PORT
	adminKP keyPair
	exited  chan string // names of processes that exited while `up` ran
}

func (c *upRun) path(p ...string) string { return filepath.Join(append([]string{c.o.Dir}, p...)...) }
func (c *upRun) bin(name string) string  { return filepath.Join(c.o.BinDir, name) }

func (c *upRun) step(format string, args ...any) {
	fmt.Fprintf(c.o.Out, "%6.1fs  %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

func (c *upRun) run() error {
	if err := c.pki(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	c.step("certificates and kubeconfigs in %s", c.path("pki"))
	if err := c.network(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := c.relay(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.controlPlane(); err != nil {
		return err
	}
	for i := 1; i <= c.o.Nodes; i++ {
		if err := c.node(i); err != nil {
			return fmt.Errorf("%s: %w", nodeName(i), err)
		}
	}
	c.step("%d node(s) started: kubelet, cri-fake, csi-fake each", c.o.Nodes)
	if err := c.podNetwork(); err != nil {
		return err
	}
	if c.o.EmptyCNI {
		return nil
	}
	return c.waitNodes("Ready", func(n *corev1.Node) bool { return nodeReady(n) })
}

// pki writes the certificates: one CA signs them all (clients and servers; the API server trusts it for
// client certificates, the kubelets and the controller-manager for the API server, the API server for the
// kubelets' serving certificates).
func (c *upRun) pki() error {
	var err error
	if c.ca, err = newCA("plugsim-ca"); err != nil {
		return err
	}
	dir := c.path("pki")
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), c.ca.pem, 0o644); err != nil {
		return err
	}
	caKey, err := c.ca.keyPEM()
	if err != nil {
		return err
	}
	// The controller-manager signs CSRs (kubelet serving and client rotation) with it.
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), caKey, 0o600); err != nil {
		return err
	}
	if err := serviceAccountKeys(dir); err != nil {
		return err
	}
	leaves := map[string]certSpec{
		// The names and addresses a client may reach it by: the host's relay (127.0.0.1), the bridge
		// (the kubelets), the kubernetes Service's address and names (pods).
		"apiserver": {cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: ips("127.0.0.1", cpAddr, serviceIP)},
		// --kubelet-client-certificate: bound to system:kubelet-api-admin (kubectl logs, exec, port-forward).
		"apiserver-kubelet-client": {cn: "kube-apiserver-kubelet-client", client: true},
		"admin":                    {cn: "plugsim-admin", groups: []string{"system:masters"}, client: true},
		// The bootstrap RBAC policy binds these two user names to their roles.
		"controller-manager": {cn: "system:kube-controller-manager", client: true},
		"scheduler":          {cn: "system:kube-scheduler", client: true},
	}
	for _, s := range append(sidecars, snapshotController) {
		leaves[s] = certSpec{cn: "plugsim:" + s, client: true}
	}
	// The front proxy: the API server's client to aggregated API servers, and what the controller-manager's
	// and scheduler's delegated authentication read from extension-apiserver-authentication (without it
	// they log a missing CA bundle, over and over). A CA of its own, as kubeadm makes.
	fp, err := newCA("plugsim-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "front-proxy-ca.crt"), fp.pem, 0o644); err != nil {
		return err
	}
	fpClient, err := fp.issue(certSpec{cn: "front-proxy-client", client: true})
	if err != nil {
		return err
	}
	if err := fpClient.write(dir, "front-proxy-client"); err != nil {
		return err
	}
	kps := map[string]keyPair{}
	for name, spec := range leaves {
		kp, err := c.ca.issue(spec)
		if err != nil {
			return err
		}
		if err := kp.write(dir, name); err != nil {
			return err
		}
		kps[name] = kp
	}
	inside := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	for _, name := range append([]string{"controller-manager", "scheduler", snapshotController}, sidecars...) {
		if err := os.WriteFile(c.path("kubeconfigs", name+".kubeconfig"), kubeconfig(inside, c.ca.pem, name, kps[name]), 0o600); err != nil {
			return err
		}
	}
	// DIR/kubeconfig's server is filled in once the relay has its port.
	c.adminKP = kps["admin"]
	return nil
}

// network makes the control-plane namespace with the bridge every node's veth joins.
func (c *upRun) network() error {
	c.cpNS = c.st.Prefix + "-cp"
	if err := c.st.addNetns(c.cpNS); err != nil {
		return err
	}
	cmds := [][]string{
		{"netns", "add", c.cpNS},
		{"-n", c.cpNS, "link", "set", "lo", "up"},
		{"-n", c.cpNS, "link", "add", bridgeName, "type", "bridge"},
		{"-n", c.cpNS, "addr", "add", cpAddr + "/24", "dev", bridgeName},
		{"-n", c.cpNS, "link", "set", bridgeName, "up"},
	}
	if err := ipCmds(cmds); err != nil {
		return err
	}
	c.step("control-plane network namespace %s: bridge %s %s/24", c.cpNS, bridgeName, cpAddr)
	return nil
}

func ipCmds(cmds [][]string) error {
	for _, a := range cmds {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(a, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// relay starts `harness cluster relay`: it listens on the host's 127.0.0.1 (the socket made here and
// handed over as its fd 3, so the port is known before it runs) and carries each connection to the API
// server inside the control-plane namespace.
func (c *upRun) relay() error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.o.Port)))
	if err != nil {
		return err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	defer f.Close()
	c.st.Port = ln.Addr().(*net.TCPAddr).Port
	args := append(append([]string{}, c.o.Relay[1:]...), "--dir", c.o.Dir, "--netns", nsPath(c.cpNS), "--target", fmt.Sprintf("127.0.0.1:%d", apiPort))
	if _, err := c.startProc("relay", "", c.o.Relay[0], args, f); err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.st.Port)
	if err := os.WriteFile(c.path("kubeconfig"), kubeconfig(server, c.ca.pem, "admin", c.adminKP), 0o600); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.pem)
	cert, err := tls.X509KeyPair(c.adminKP.cert, c.adminKP.key)
	if err != nil {
		return err
	}
	c.admin = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}
	c.server = server
	c.step("relay: host 127.0.0.1:%d → %s 127.0.0.1:%d", c.st.Port, c.cpNS, apiPort)
	return nil
}

// startProc starts a process in network namespace netns (the host's when empty) with only that namespace
// entered (nsenter --net, as the standalone kubelet suite does: `ip netns exec` also remounts /sys, and
// the kubelet then finds no cgroup mounts). It runs in a session of its own, so it outlives `up`; its
// output goes to DIR/logs/NAME.log.
func (c *upRun) startProc(name, netns, bin string, args []string, extra ...*os.File) (*exec.Cmd, error) {
	logf, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	argv := append([]string{bin}, args...)
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + nsPath(netns), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.Dir = c.o.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := Process{Name: name, PID: cmd.Process.Pid}
	// nsenter without --fork execs the program in place: the pid stays the program's.
	p.Start, _ = procStart(p.PID)
	if err := c.st.addProcess(p); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		select {
		case c.exited <- name:
		default:
		}
	}()
	return cmd, nil
}

// wait polls cond until it holds, a process `up` started exits, or the start's deadline passes.
func (c *upRun) wait(what string, cond func() (bool, string)) error {
	last := ""
	for {
		ok, desc := cond()
		if ok {
			return nil
		}
		last = desc
		select {
		case name := <-c.exited:
			return fmt.Errorf("%s exited while waiting for %s; its log:\n%s", name, what, tail(c.path("logs", name+".log"), 30))
		case <-c.ctx.Done():
			if errors.Is(c.ctx.Err(), context.Canceled) {
				return fmt.Errorf("interrupted while waiting for %s", what)
			}
			return fmt.Errorf("timed out waiting for %s; last seen: %s", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return "  " + strings.Join(l, "\n  ")
}

// get GETs an API path as the admin, through the relay.
func (c *upRun) get(path string, into any) (int, error) {
	req, err := http.NewRequestWithContext(c.ctx, "GET", c.server+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.admin.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	if into != nil {
		return resp.StatusCode, json.Unmarshal(b, into)
	}
	return resp.StatusCode, nil
}

func (c *upRun) kubectl(args ...string) error {
	out, err := exec.CommandContext(c.ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.path("kubeconfig")}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dialIn connects to addr from inside a network namespace: the socket is made on a thread switched into
// it and stays in it.
func dialIn(ctx context.Context, netnsPath, addr string) (net.Conn, error) {
	var conn net.Conn
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

func (c *upRun) controlPlane() error {
	etcdArgs := []string{
		"--name", "plugsim", "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "plugsim=http://127.0.0.1:2380",
		// A throw-away cluster: losing the last writes in a power cut costs nothing, and fsync on a busy
		// disk costs the API server seconds.
		"--unsafe-no-fsync", "--log-level", "warn",
	}
	if _, err := c.startProc("etcd", c.cpNS, c.bin("etcd"), etcdArgs); err != nil {
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

	pki := func(f string) string { return c.path("pki", f) }
	apiArgs := []string{"kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort), "--advertise-address", cpAddr,
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"),
		"--service-cluster-ip-range", serviceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--authorization-mode", "Node,RBAC",
		// ServiceAccount is on by default; NodeRestriction keeps each kubelet to its own Node and pods.
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", pki("ca.crt"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--allow-privileged=true",
		"--requestheader-client-ca-file", pki("front-proxy-ca.crt"), "--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", pki("front-proxy-client.crt"), "--proxy-client-key-file", pki("front-proxy-client.key"),
		"--cert-dir", c.path("pki", "apiserver-generated"),
		"--profiling=false",
	}
	if _, err := c.startProc("kube-apiserver", c.cpNS, c.bin("kube"), apiArgs); err != nil {
		return err
	}
	if err := c.wait("the API server's /readyz (through the relay)", func() (bool, string) {
		if _, err := c.get("/readyz", nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	}); err != nil {
		return err
	}
	c.step("kube-apiserver v1.37.2 ready on %s:%d (Node,RBAC)", cpAddr, apiPort)

	// RBAC: the API server's kubelet client, then each CSI sidecar's ClusterRole (examples/csi).
	for name, b := range map[string][]byte{"rbac.yaml": []byte(rbacManifest), "sidecars-rbac.yaml": csiexample.SidecarsRBAC} {
		if err := os.WriteFile(c.path("manifests", name), b, 0o644); err != nil {
			return err
		}
		if err := c.kubectl("apply", "-f", c.path("manifests", name)); err != nil {
			return err
		}
	}
	// The CSIDriver objects and the StorageClasses of examples/csi, as a driver's deployment ships them:
	// without a CSIDriver the kubelet treats csi.plugsim.dev as attach-required without pod info and
	// refuses every inline volume, and without a default class a PVC naming none stays Pending.
	for name, b := range map[string][]byte{"csidriver.yaml": csiexample.CSIDriver, "storageclass.yaml": csiexample.StorageClass} {
		if err := os.WriteFile(c.path("manifests", name), b, 0o644); err != nil {
			return err
		}
		if err := c.kubectl("apply", "-f", c.path("manifests", name)); err != nil {
			return err
		}
	}
	c.step("CSIDriver objects %s and %s, StorageClasses plugsim-fake (default) and example", driverName, ephemeralDriver)
	snapshots, err := c.snapshotCRDs()
	if err != nil {
		return err
	}

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

	// The CSI controller plugin and, where built, the real sidecars against its socket.
	ctrlSock := c.path("csi", "controller", "csi.sock")
	if _, err := c.startProc("csi-fake-controller", c.cpNS, c.bin("csi-fake"), []string{
		"--mode", "controller", "--endpoint", "unix://" + ctrlSock, "--node-id", "controller",
		"--known-nodes", "*", "--state-dir", c.path("csi", "state"), "--trace", c.path("csi", "controller.jsonl"),
		"--admin-socket", "unix://" + controllerAdmin(c.o.Dir),
		// The zone every node reports (see node): CreateVolume serves its requisite, refuses another's.
		"--topology", zoneLabel(),
	}); err != nil {
		return err
	}
	var run []string
	for _, s := range sidecars {
		if _, err := os.Stat(c.bin(s)); err != nil {
			continue
		}
		args := []string{"--kubeconfig", c.path("kubeconfigs", s+".kubeconfig"), "--csi-address", ctrlSock, "--v", "2"}
		if _, err := c.startProc(s, c.cpNS, c.bin(s), args); err != nil {
			return err
		}
		run = append(run, s)
	}
	if _, err := os.Stat(c.bin(snapshotController)); err == nil && snapshots {
		if _, err := c.startProc(snapshotController, c.cpNS, c.bin(snapshotController), []string{
			"--kubeconfig", c.path("kubeconfigs", snapshotController+".kubeconfig"), "--v", "2",
		}); err != nil {
			return err
		}
		run = append(run, snapshotController)
	}
	if len(run) == 0 {
		c.step("csi-fake controller on %s (no CSI sidecars in %s: none run)", ctrlSock, c.o.BinDir)
	} else {
		c.step("csi-fake controller on %s, with %s", ctrlSock, strings.Join(run, ", "))
	}
	return nil
}

// snapshotCRDs applies external-snapshotter's CRDs from BinDir/snapshot-crds (`make sidecars` copies
// them there), waits until the API server serves them, and applies examples/csi's VolumeSnapshotClass.
// Without the directory there are none (and no snapshot-controller runs); it reports which.
func (c *upRun) snapshotCRDs() (bool, error) {
	dir := c.bin("snapshot-crds")
	if crds, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(crds) == 0 {
		c.step("no VolumeSnapshot CRDs in %s (make sidecars copies them): no snapshot-controller", dir)
		return false, nil
	}
	// Server-side: a client-side apply would copy each CRD's whole schema into an annotation.
	if err := c.kubectl("apply", "--server-side", "-f", dir); err != nil {
		return false, err
	}
	if err := c.kubectl("wait", "--for", "condition=Established", "--timeout", "120s", "-f", dir); err != nil {
		return false, err
	}
	if err := os.WriteFile(c.path("manifests", "volumesnapshotclass.yaml"), csiexample.VolumeSnapshotClass, 0o644); err != nil {
		return false, err
	}
	if err := c.kubectl("apply", "-f", c.path("manifests", "volumesnapshotclass.yaml")); err != nil {
		return false, err
	}
	c.step("VolumeSnapshot CRDs (external-snapshotter v8) and VolumeSnapshotClass plugsim-snapshots (default)")
	return true, nil
}

// node makes node i: its namespace and veth, its certificates and configuration, and starts cri-fake,
// csi-fake (node plugin, registering itself) and the kubelet in it.
func (c *upRun) node(i int) error {
	name, ip := nodeName(i), nodeIP(i)
	netns := fmt.Sprintf("%s-%s", c.st.Prefix, name)
	c.st.mu.Lock()
	c.st.Nodes = append(c.st.Nodes, Node{Name: name, Netns: netns, IP: ip})
	c.st.mu.Unlock()
	if err := c.st.addNetns(netns); err != nil {
		return err
	}
	peer := "veth-" + name // in the control-plane namespace, on the bridge
	if err := ipCmds([][]string{
		{"netns", "add", netns},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", c.cpNS},
		{"-n", c.cpNS, "link", "set", peer, "master", bridgeName},
		{"-n", c.cpNS, "link", "set", peer, "up"},
		{"-n", netns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		// The default route ends at the control-plane namespace, which forwards nothing: the kubelet and
		// the pods see a node with a default route, and no packet leaves the machine.
		{"-n", netns, "route", "add", "default", "via", cpAddr},
	}); err != nil {
		return err
	}
	// A node routes for its pods (and, once the pod CIDRs are known, for the other nodes' pods).
	if out, err := exec.Command("nsenter", "--net="+nsPath(netns), "--", "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return fmt.Errorf("ip_forward: %v: %s", err, out)
	}

	nd := c.path("nodes", name)
	for _, d := range []string{"kubelet/plugins_registry", "kubelet/plugins/" + driverName, "kubelet/plugins/" + ephemeralDriver, "logs", "cni/net.d", "cni/data", "cri", "state/cri", "state/csi", "state/csi-ephemeral"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return err
		}
	}
	// The conflist names cni-fake's faults file, which must exist (cni-fake refuses a missing one).
	if err := nodeCNIFaults(nd).Reset(); err != nil {
		return err
	}
	client, err := c.ca.issue(certSpec{cn: "system:node:" + name, groups: []string{"system:nodes"}, client: true})
	if err != nil {
		return err
	}
	serving, err := c.ca.issue(certSpec{cn: name, dns: []string{name}, ips: ips(ip), server: true})
	if err != nil {
		return err
	}
	if err := serving.write(nd, "kubelet-serving"); err != nil {
		return err
	}
	inside := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
	if err := os.WriteFile(filepath.Join(nd, "kubelet.kubeconfig"), kubeconfig(inside, c.ca.pem, "system:node:"+name, client), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nd, "kubelet.yaml"), kubeletConfig(nd, ip, c.path("pki", "ca.crt")), 0o644); err != nil {
		return err
	}

	if _, err := c.startProc(name+"-cri-fake", netns, c.bin("cri-fake"), []string{
		"--endpoint", "unix://" + filepath.Join(nd, "cri.sock"),
		"--root-dir", filepath.Join(nd, "cri"), "--state-dir", filepath.Join(nd, "state/cri"),
		"--netns", "real", "--cni-conf-dir", filepath.Join(nd, "cni/net.d"), "--cni-bin-dir", c.o.BinDir,
		// runc as containerd's default names it, and a second handler a RuntimeClass can name (what a node
		// with gVisor installed would serve); any other handler fails RunPodSandbox as containerd's does.
		"--runtime-handlers", "runc," + extraRuntimeHandler,
		"--trace", filepath.Join(nd, "cri.jsonl"), "--admin-socket", "unix://" + nodeCRIAdmin(nd),
	}); err != nil {
		return err
	}
	csiSock := filepath.Join(nd, "kubelet/plugins", driverName, "csi.sock")
	if _, err := c.startProc(name+"-csi-fake", netns, c.bin("csi-fake"), []string{
		"--endpoint", "unix://" + csiSock, "--mode", "node", "--node-id", name,
		"--state-dir", filepath.Join(nd, "state/csi"),
		// Network-attached storage, as a SAN or a zone's cloud disks are: every node reports the one
		// zone and no node key, so a PV's node affinity (topology.plugsim.dev/zone in [zone-a]) holds
		// on every node; the volumes' data is the controller's, so a volume moved to another node
		// keeps what a pod wrote; and bind publishes put that data at the pod's mount.
		"--node-topology=false", "--topology", zoneLabel(), "--data-dir", c.path("csi", "state"), "--mount", "bind",
		"--register", "--plugin-registry-dir", filepath.Join(nd, "kubelet/plugins_registry"),
		"--trace", filepath.Join(nd, "csi.jsonl"), "--admin-socket", "unix://" + nodeCSIAdmin(nd),
	}); err != nil {
		return err
	}
	// The ephemeral-only driver (like Calico's csi.tigera.io): a node plugin with no controller and no
	// sidecar, registering itself so the kubelet adds it to the node's CSINode and publishes inline volumes.
	if _, err := c.startProc(name+"-csi-fake-ephemeral", netns, c.bin("csi-fake"), []string{
		"--ephemeral-only", "--driver-name", ephemeralDriver,
		"--endpoint", "unix://" + filepath.Join(nd, "kubelet/plugins", ephemeralDriver, "csi.sock"), "--node-id", name,
		"--state-dir", filepath.Join(nd, "state/csi-ephemeral"),
		"--register", "--plugin-registry-dir", filepath.Join(nd, "kubelet/plugins_registry"),
		"--trace", filepath.Join(nd, "csi-ephemeral.jsonl"),
	}); err != nil {
		return err
	}
	if err := c.wait(name+"'s cri-fake socket", func() (bool, string) {
		_, err := os.Stat(filepath.Join(nd, "cri.sock"))
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	_, err = c.startProc(name+"-kubelet", netns, c.bin("kubelet"), []string{
		"--config", filepath.Join(nd, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(nd, "kubelet.kubeconfig"),
		"--root-dir", filepath.Join(nd, "kubelet"),
		"--hostname-override", name,
		// Without it the kubelet resolves its host name through DNS (no server in reach: 10 s a lookup).
		"--node-ip", ip,
	})
	return err
}

// kubeletConfig is a node's KubeletConfiguration: the standalone suite's settings for this machine (no
// cgroup hierarchy of its own, cgroupfs), serving on the node's address with the cluster's certificates,
// and checking callers against the API server (webhook authentication and authorisation).
func kubeletConfig(nd, ip, caFile string) []byte {
	return fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: false
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
cgroupDriver: cgroupfs
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%[1]s/cri.sock
podLogsDir: %[1]s/logs
tlsCertFile: %[1]s/kubelet-serving.crt
tlsPrivateKeyFile: %[1]s/kubelet-serving.key
clusterDomain: cluster.local
# No DNS server runs in the cluster, and the host's resolv.conf names servers out of reach.
resolvConf: ""
# The machine's disk and memory are shared by every node: the default thresholds (10%% disk free) would
# put DiskPressure on all of them at once on a full disk.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s}
authorization: {mode: Webhook}
`, nd, ip, caFile)
}

// conflist is a node's CNI configuration: cni-fake in veth mode (the pod's eth0 paired with a veth in the
// node's namespace, a host route to the pod) with addresses from the node's pod CIDR, then portmap.
func conflist(nd, podCIDR string) []byte {
	return fmt.Appendf(nil, `{
  "cniVersion": "1.1.0",
  "name": "plugsim",
  "plugins": [
    {
      "type": "cni-fake",
      "mode": "veth",
      "dataDir": "%[1]s/cni/data",
      "logFile": "%[1]s/cni.jsonl",
      "faultsFile": "%[1]s/cni/faults.json",
      "ipam": {"type": "cni-fake", "ranges": [[{"subnet": "%[2]s"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
  ]
}
`, nd, podCIDR)
}

// podNetwork waits for every node's pod CIDR, writes each node's conflist (into its conf dir unless
// EmptyCNI) and routes each node's pod CIDR through its address on every other node, as Calico's BGP
// routes do without encapsulation.
func (c *upRun) podNetwork() error {
	if err := c.waitNodes("registered with a podCIDR", func(n *corev1.Node) bool { return n.Spec.PodCIDR != "" }); err != nil {
		return err
	}
	var list corev1.NodeList
	if _, err := c.get("/api/v1/nodes", &list); err != nil {
		return err
	}
	cidr := map[string]string{}
	for _, n := range list.Items {
		cidr[n.Name] = n.Spec.PodCIDR
	}
	c.st.mu.Lock()
	for i := range c.st.Nodes {
		c.st.Nodes[i].PodCIDR = cidr[c.st.Nodes[i].Name]
	}
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	if err := c.st.save(); err != nil {
		return err
	}
	for _, n := range nodes {
		nd := c.path("nodes", n.Name)
		conf := conflist(nd, n.PodCIDR)
		if err := os.WriteFile(filepath.Join(nd, "cni", "plugsim.conflist"), conf, 0o644); err != nil {
			return err
		}
		if !c.o.EmptyCNI {
			if err := writeAtomic(filepath.Join(nd, "cni", "net.d", "10-plugsim.conflist"), conf); err != nil {
				return err
			}
		}
		var routes [][]string
		for _, m := range nodes {
			if m.Name != n.Name {
				routes = append(routes, []string{"-n", n.Netns, "route", "add", m.PodCIDR, "via", m.IP})
			}
		}
		if err := ipCmds(routes); err != nil {
			return err
		}
		c.step("%s %s podCIDR %s", n.Name, n.IP, n.PodCIDR)
	}
	return nil
}

// writeAtomic writes through a temporary file and a rename, so cri-fake's watch never reads half a file.
func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// waitNodes waits until every node of the cluster is in the API and satisfies cond.
func (c *upRun) waitNodes(what string, cond func(*corev1.Node) bool) error {
	err := c.wait(fmt.Sprintf("%d node(s) %s", c.o.Nodes, what), func() (bool, string) {
		var list corev1.NodeList
		if _, err := c.get("/api/v1/nodes", &list); err != nil {
			return false, err.Error()
		}
		ok := 0
		var desc []string
		for i := range list.Items {
			n := &list.Items[i]
			if cond(n) {
				ok++
			}
			desc = append(desc, n.Name+": "+readyMessage(n))
		}
		return ok == c.o.Nodes, fmt.Sprintf("%d of %d: %s", ok, c.o.Nodes, strings.Join(desc, "; "))
	})
	if err == nil {
		c.step("%d node(s) %s", c.o.Nodes, what)
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
