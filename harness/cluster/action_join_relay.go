package cluster

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/containernetworking/plugins/pkg/ns"
)

// joinRelay makes the API server reachable from this machine's nodes at the address the kubeconfig names,
// the one its serving certificate holds (so TLS checks out end to end): inside each node's namespace a
// listener on that address (added to the namespace's loopback when it is not a loopback address), and in
// the hub namespace one on 198.18.M.1:6443, where the kubernetes Service leads the pods. One relay process
// holds them all and dials the API server from the host's namespace, as the admin's kubectl does. Nothing
// is added to the host's interfaces or routes.
type joinRelay struct{}

func (joinRelay) Name() string { return "relay the API server to this machine's nodes" }

func (joinRelay) Execute(c *actionContext) error {
	host, _, err := net.SplitHostPort(c.join.apiAddr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	c.st.mu.Lock()
	nodes := append([]Node(nil), c.st.Nodes...)
	c.st.mu.Unlock()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	listen := func(netns, addr string) error {
		return ns.WithNetNSPath(nsPath(netns), func(ns.NetNS) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			f, err := ln.(*net.TCPListener).File()
			if err != nil {
				return err
			}
			files = append(files, f)
			return nil
		})
	}
	for _, n := range nodes {
		if !ip.IsLoopback() {
			if err := ipCmds([][]string{{"-n", n.Netns, "addr", "add", host + "/32", "dev", "lo"}}); err != nil {
				return err
			}
		}
		if err := listen(n.Netns, c.join.apiAddr); err != nil {
			return fmt.Errorf("%s: listen on %s: %w", n.Name, c.join.apiAddr, err)
		}
	}
	hub := net.JoinHostPort(c.hubAddr, strconv.Itoa(apiPort))
	if err := listen(c.cpNS, hub); err != nil {
		return fmt.Errorf("listen on %s in %s: %w", hub, c.cpNS, err)
	}
	args := append(append([]string{}, c.o.Relay[1:]...), "--dir", c.o.Dir, "--target", c.join.apiAddr, "--listeners", strconv.Itoa(len(files)))
	if _, err := c.startProc("relay", "", c.o.Relay[0], args, files...); err != nil {
		return err
	}
	c.step("relay: %s in each node's namespace and %s in %s → the API server %s", c.join.apiAddr, hub, c.cpNS, c.join.apiAddr)
	return nil
}
