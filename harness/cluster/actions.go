package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/plugsim/plugsim/harness/cluster/nodens"
	"github.com/plugsim/plugsim/internal/atomicfile"
)

// `up` is an ordered list of actions that share one context, in the shape of kind's cluster creation
// (sigs.k8s.io/kind, pkg/cluster/internal/create/actions): each action is a file of its own
// (action_*.go), and a new part of the cluster, an add-on say, is a new action in the list rather than a
// longer function. An action prints a timed line for each thing it made (step); when one fails, `up`
// names it, says why, and names the logs of the processes it started.
type action interface {
	// Name says what the action does, as a failure names it: "start etcd".
	Name() string
	// Execute does it. Whatever it makes that outlives `up` goes into the state file before it is
	// made (startProc, State.addNetns), so `down` finds it after any failure.
	Execute(*actionContext) error
}

// upActions is the list `up` runs, in order.
func upActions(o Options) []action {
	list := []action{
		certificates{},        // action_certificates.go: the CA, every component's certificate and kubeconfig
		controlPlaneNetwork{}, // action_network.go: the control-plane namespace and its bridge
		apiRelay{},            // action_relay.go: the host's 127.0.0.1 port carried into that namespace
		etcd{},                // action_etcd.go
		apiServer{},           // action_apiserver.go: kube-apiserver, and its kubelet client's RBAC
		controllers{},         // action_controllers.go: kube-controller-manager and kube-scheduler
		imageCatalog{},        // action_catalog.go: DIR/image-catalog.yaml, which every node's cri-fake reads
		nodes{},               // action_nodes.go: per node a namespace, cri-fake and a kubelet
		csiDriver{},           // action_csi.go: CSIDriver objects, StorageClasses, the sidecars' RBAC, snapshot CRDs
		podNetwork{},          // action_podnetwork.go: pod CIDRs, each node's conflist, routes between nodes and from the control plane
		kubeProxy{},           // action_kubeproxy.go: kube-proxy on every node (Services, the kubernetes Service too)
	}
	if o.KubemarkNodes > 0 {
		list = append(list, kubemarkNodes{}) // action_kubemark.go: hollow nodes, the real kubelet code on the upstream fake runtime
	}
	if o.KWOKNodes > 0 {
		list = append(list, kwokNodes{}) // action_kwok.go: Node objects KWOK's controller keeps Ready
	}
	if !o.EmptyCNI {
		list = append(list,
			waitReady{},  // action_ready.go
			clusterDNS{}, // action_clusterdns.go: kubeadm's CoreDNS add-on, kube-dns at the kubelets' clusterDNS
		)
	}
	// action_csi.go: csi-fake's controller with the real sidecars, snapshot-controller, the node plugins, as pods
	return append(list, csiPods{})
}

// StepError is how `up` fails: the action that failed, why, and the logs to read.
type StepError struct {
	Step string   // the action's Name
	Err  error    // why
	Logs []string // the logs of the processes the action started (or, when none, the components' log directory)
}

func (e *StepError) Unwrap() error { return e.Err }

// Error is one line: the step, the first line of why, and the logs. Detail has the rest.
func (e *StepError) Error() string {
	why, _, _ := strings.Cut(e.Err.Error(), "\n")
	return fmt.Sprintf("%s failed: %s; read %s", e.Step, why, shownLogs(e.Logs))
}

// logsShown bounds the logs an error's line names: a 200-node start's step starts 400 processes, and
// a line naming every log buries its reason.
const logsShown = 4

// shownLogs names logs, or, past logsShown of them, the first (what wait puts first: a process that
// exited) and the last ones (the processes started last, which a step that timed out waited for),
// and how many more the directory holds.
func shownLogs(logs []string) string {
	if len(logs) <= logsShown {
		return strings.Join(logs, ", ")
	}
	shown := append([]string{logs[0]}, logs[len(logs)-(logsShown-1):]...)
	return fmt.Sprintf("%s and %d more in %s", strings.Join(shown, ", "), len(logs)-logsShown, filepath.Dir(logs[0]))
}

// Detail is what the error says past its first line (a log's last lines), or "".
func (e *StepError) Detail() string {
	_, rest, _ := strings.Cut(e.Err.Error(), "\n")
	return rest
}

// actionContext is what every action shares: the options, the state file, the start's deadline, and
// what earlier actions made that later ones use (the CA, the admin's client, the control-plane
// namespace).
type actionContext struct {
	o      Options
	st     *State
	ctx    context.Context
	start  time.Time
	exited chan string // names of processes that exited while `up` ran

	cpNS    string  // the control-plane network namespace (controlPlaneNetwork); a joining machine's hub namespace (joinNetwork)
	hubAddr string  // the bridge's address in cpNS: cpAddr, or a joining machine's (joinNetwork)
	ca      *ca     // the cluster's CA (certificates)
	adminKP keyPair // the admin's client certificate (certificates)
	admin   *http.Client
	server  string // the relay's https://127.0.0.1:PORT (apiRelay)

	join *joinContext // what `join` learnt of the cluster it joins; nil for `up`

	logs []string // the log files of the processes the running action started
}

// run runs the actions in order and stops at the first that fails.
func (c *actionContext) run(list []action) error {
	for _, a := range list {
		c.logs = nil
		if err := a.Execute(c); err != nil {
			logs := c.logs
			if len(logs) == 0 {
				logs = []string{c.path("logs")}
			}
			return &StepError{Step: a.Name(), Err: err, Logs: logs}
		}
	}
	return nil
}

// nodeName is node i's name (from 1): nodeI, or NAME-nodeI on a joining machine.
func (c *actionContext) nodeName(i int) string {
	if c.join != nil {
		return c.join.name + "-" + nodeName(i)
	}
	return nodeName(i)
}

// nodeIP is node i's address: 198.18.0.(10+i), or 198.18.M.(10+i) on a joining machine's subnet M.
func (c *actionContext) nodeIP(i int) string {
	if c.join != nil {
		return subnetIP(c.join.subnet, 10+i)
	}
	return nodeIP(i)
}

func (c *actionContext) path(p ...string) string {
	return filepath.Join(append([]string{c.o.Dir}, p...)...)
}
func (c *actionContext) bin(name string) string { return filepath.Join(c.o.BinDir, name) }

// withExtra is args followed by the extra arguments the options give component.
func (c *actionContext) withExtra(component string, args []string) []string {
	return append(args, c.o.ExtraArgs[component]...)
}

// step prints one timed line: what an action made.
func (c *actionContext) step(format string, args ...any) {
	fmt.Fprintf(c.o.Out, "%6.1fs  %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

// startProc starts a process in network namespace netns (the host's when empty) with only that namespace
// entered (nsenter --net, as the standalone kubelet suite does: `ip netns exec` also remounts /sys, and
// the kubelet then finds no cgroup mounts). It runs in a session of its own, so it outlives `up`, working
// in DIR (what `down` checks before it signals it: Process.ours); its output goes to DIR/logs/NAME.log
// (0600: a component's log can hold what its requests carried).
func (c *actionContext) startProc(name, netns, bin string, args []string, extra ...*os.File) (*exec.Cmd, error) {
	argv := append([]string{bin}, args...)
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + nsPath(netns), "--"}, argv...)
	}
	return c.startArgv(name, argv, extra...)
}

// startNodeProc starts program (its kubelet, cri-fake, csi-fakes) of node nd in the node's network
// namespace and its mount namespace (package nodens), working in DIR there too (nsenter --wd: entering a mount
// namespace would otherwise leave it at the namespace's root); where the node has a cgroup namespace, in
// it too, in the program's cgroup of the node (package nodens).
func (c *actionContext) startNodeProc(node, program, netns, nd, bin string, args []string) (*exec.Cmd, error) {
	name := node + "-" + program
	argv := []string{"nsenter", "--net=" + nsPath(netns), "--mount=" + nodens.MountNS(nd), "--wd=" + c.o.Dir}
	if nodens.NSInode(nodens.CgroupNS(nd)) == 0 {
		return c.startArgv(name, append(append(argv, "--", bin), args...))
	}
	argv = append(argv, "--cgroup="+nodens.CgroupNS(nd), "--", bin)
	argv, err := c.inNodeCgroup(node, program, append(argv, args...))
	if err != nil {
		return nil, err
	}
	return c.startArgv(name, argv)
}

// inNodeCgroup is argv run in program's cgroup of node (nodens.InCgroup).
func (c *actionContext) inNodeCgroup(node, program string, argv []string) ([]string, error) {
	return nodens.InCgroup(nodens.NodeCgroup(c.st.Prefix, node)+"/"+nodens.ServiceCgroup(program), argv)
}

// startNodeNetProc starts program (kube-proxy) of node nd in the node's network namespace only: it sees
// the machine's files and cgroups, as startProc's processes do; where the node has its own cgroups,
// it runs in the program's cgroup of the node, so what the node runs is in the node's cgroup.
func (c *actionContext) startNodeNetProc(node, program, netns, nd, bin string, args []string) (*exec.Cmd, error) {
	name := node + "-" + program
	argv := append([]string{"nsenter", "--net=" + nsPath(netns), "--", bin}, args...)
	if nodens.NSInode(nodens.CgroupNS(nd)) != 0 {
		var err error
		if argv, err = c.inNodeCgroup(node, program, argv); err != nil {
			return nil, err
		}
	}
	return c.startArgv(name, argv)
}

// startArgv starts argv as startProc says.
func (c *actionContext) startArgv(name string, argv []string, extra ...*os.File) (*exec.Cmd, error) {
	logPath := c.path("logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c.logs = append(c.logs, logPath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.Dir = c.o.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := Process{Name: name, PID: cmd.Process.Pid}
	// nsenter without --fork execs the program in place (and nodens.InCgroup's shell execs nsenter): the pid
	// stays the program's.
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
func (c *actionContext) wait(what string, cond func() (bool, string)) error {
	last := ""
	for {
		ok, desc := cond()
		if ok {
			return nil
		}
		last = desc
		select {
		case name := <-c.exited:
			log := c.path("logs", name+".log")
			// The one to read first, whichever action started it.
			c.logs = append([]string{log}, slices.DeleteFunc(c.logs, func(l string) bool { return l == log })...)
			return fmt.Errorf("%s exited while waiting for %s\n%s ends:\n%s", name, what, log, tail(log, 30))
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
func (c *actionContext) get(path string, into any) (int, error) {
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

func (c *actionContext) kubectl(args ...string) error {
	cmd := exec.CommandContext(c.ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.path("kubeconfig")}, args...)...)
	// A step's kubectl is up's own and goes with it: killed, up leaves none behind for down to find
	// (down acts only on what cluster.json names, and it never names a step's command).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
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

func ipCmds(cmds [][]string) error {
	for _, a := range cmds {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(a, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ipBatch runs the ip commands cmds (each without `ip` and without -n) in the network namespace netns
// through one `ip -n NETNS -batch -`: a 160-node cluster's pod routes were 25,440 execs of ip, over
// three minutes of `up`. ip stops at the first command that fails and names its line. The arguments
// are our own names, CIDRs and addresses: none holds white space or a quote.
func ipBatch(netns string, cmds [][]string) error {
	if len(cmds) == 0 {
		return nil
	}
	var in strings.Builder
	for _, a := range cmds {
		in.WriteString(strings.Join(a, " "))
		in.WriteByte('\n')
	}
	cmd := exec.Command("ip", "-n", netns, "-batch", "-")
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s -batch (%d commands, the first %q): %v: %s", netns, len(cmds), strings.Join(cmds[0], " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeAtomic writes through a temporary file and a rename (never through a symlink), so cri-fake's watch
// never reads half a file. The temporary file is made beside the watched directory, not in it.
func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), "."+filepath.Base(path)+".tmp")
	if err := atomicfile.Write(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// apply writes a manifest into DIR/manifests (so a user can read what the cluster was given) and applies it.
func (c *actionContext) apply(name string, manifest []byte, flags ...string) error {
	p := c.path("manifests", name)
	if err := atomicfile.Write(p, manifest, 0o644); err != nil {
		return err
	}
	return c.kubectl(append([]string{"apply"}, append(flags, "-f", p)...)...)
}

// runAll runs list within c.o.Timeout of parent (nil: none but the timeout). When an action fails it
// prints what the failure says past its first line (a log's end), then stops what was started (Down),
// keeping the logs; the error returned, the last line a user sees, names the step, why and the logs.
func (c *actionContext) runAll(parent context.Context, list []action) (err error) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, c.o.Timeout)
	defer cancel()
	c.ctx = ctx
	defer func() {
		if err == nil {
			return
		}
		var se *StepError
		if errors.As(err, &se) && se.Detail() != "" {
			fmt.Fprintln(c.o.Out, se.Detail())
		}
		fmt.Fprintf(c.o.Out, "stopping what was started (logs stay in %s)\n", filepath.Join(c.o.Dir, "logs"))
		if derr := Down(c.o.Dir, c.o.Out); derr != nil {
			err = fmt.Errorf("%w; and stopping it: %v", err, derr)
		}
	}()
	return c.run(list)
}
