package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RestartKubelet stops the kubelets of the named nodes of the cluster in dir and starts each again with
// its configuration file, DIR/nodes/NODE/kubelet.yaml, as `systemctl restart kubelet` does on a kubeadm
// node after /var/lib/kubelet/config.yaml was edited (serverTLSBootstrap: true, say). The pods keep
// running in cri-fake; the new kubelet finds them again. It returns once each new kubelet answers its
// /healthz.
func RestartKubelet(dir, binDir string, names []string, out io.Writer, timeout time.Duration) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: the kubelets run as root in the nodes' namespaces")
	}
	st, err := ReadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no cluster in %s", dir)
	} else if err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("name the nodes whose kubelet to restart (node1 ...)")
	}
	index := map[string]int{}
	for _, name := range names {
		i := slices.IndexFunc(st.Nodes, func(n Node) bool { return n.Name == name })
		if i < 0 {
			return fmt.Errorf("no node %q in the cluster in %s", name, dir)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil || nodeName(n) != name {
			return fmt.Errorf("node %q: not a name `up` gives", name)
		}
		index[name] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := &actionContext{o: Options{Dir: dir, BinDir: binDir, Nodes: len(st.Nodes), Out: out}, st: st, ctx: ctx,
		start: time.Now(), exited: make(chan string, len(names))}
	for _, name := range names {
		var old []Process
		for _, p := range st.Procs {
			if p.Name == name+"-kubelet" && p.ours(dir) == nil {
				old = append(old, p)
			}
		}
		if killed := stop(old, dir); len(killed) > 0 {
			c.step("%s's kubelet killed after %v without exiting on TERM", name, stopGrace)
		}
		st.mu.Lock()
		st.Procs = slices.DeleteFunc(st.Procs, func(p Process) bool { return p.Name == name+"-kubelet" })
		st.mu.Unlock()
		nd, netns := c.path("nodes", name), fmt.Sprintf("%s-%s", st.Prefix, name)
		if err := startKubelet(c, name, nd, netns, nodeIP(index[name]), "--kubeconfig", filepath.Join(nd, "kubelet.kubeconfig")); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := c.wait(name+"'s kubelet /healthz", func() (bool, string) { return healthz(ctx, nsPath(netns)) }); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c.step("%s's kubelet restarted with %s", name, c.path("nodes", name, "kubelet.yaml"))
	}
	return nil
}

// healthz asks the kubelet of the node whose namespace is netns for its /healthz (127.0.0.1:10248 there),
// on a connection made inside that namespace (dialIn: an http.Transport would dial from goroutines of
// its own, on threads outside it).
func healthz(ctx context.Context, netns string) (bool, string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dialIn(rctx, netns, "127.0.0.1:10248")
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		return false, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode == http.StatusOK, resp.Status + ": " + string(b)
}
