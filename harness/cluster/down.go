package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/cri-fake/oci"
	"github.com/plugsim/plugsim/harness/cluster/nodens"
	"github.com/plugsim/plugsim/internal/cgrouptree"
)

// stopGrace is how long a process gets between TERM and KILL.
const stopGrace = 10 * time.Second

// Down stops the cluster in dir and takes away what it made: its processes (kubelets first, so none
// restarts a pod the fakes are tearing down), each node's mount namespace with the mounts in it (each
// kubelet's bind-mounted root dir, the tmpfs of secret and projected volumes, csi-fake's publishes,
// cri-fake's pod network namespaces), every mount under dir, its network namespaces (with them the
// veths, routes and portmap's iptables rules, which live only there), and the nodes' cgroups
// (package nodens). It keeps the logs and the certificates. With nothing to stop it does nothing and says so.
//
// It acts only on what is the cluster's own, whatever DIR/cluster.json says: a directory another local
// user made or could change is refused (CheckDir); a process is signalled only when it is still the
// one `up` started (the recorded pid and start time, working in dir); a network namespace is deleted
// only when its name starts with the prefix derived from dir itself (PrefixFor), never the file's.
func Down(dir string, out io.Writer) error {
	st, err := ReadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		// No state: `up` never ran here, or `down` already ran. Namespaces named for dir can still be
		// there if `up` crashed before its first save; they are found by name.
		st = &State{Dir: dir}
	} else if err != nil {
		return err
	}
	prefix := PrefixFor(dir)
	did := false

	// In tiers, each waited for: the kubelets (so none restarts a pod the fakes are tearing down), then
	// everything else that talks to the API server, then the API server, then etcd and the relay. The API
	// server, stopped together with etcd, spends its whole grace period retrying the store.
	tiers := make([][]Process, 4)
	n := 0
	for _, p := range st.Procs {
		if err := p.ours(dir); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(out, "not stopping %s: %v\n", p.Name, err)
			}
			continue
		}
		n++
		switch {
		case strings.HasSuffix(p.Name, "-kubelet"):
			tiers[0] = append(tiers[0], p)
		case p.Name == "kube-apiserver":
			tiers[2] = append(tiers[2], p)
		case p.Name == "etcd" || p.Name == "relay":
			tiers[3] = append(tiers[3], p)
		default:
			tiers[1] = append(tiers[1], p)
		}
	}
	for _, group := range tiers {
		if len(group) > 0 {
			if killed := stop(group, dir); len(killed) > 0 {
				fmt.Fprintf(out, "killed after %v without exiting on TERM: %s\n", stopGrace, strings.Join(killed, ", "))
			}
			did = true
		}
	}

	// A joining machine's nodes leave the cluster: their kubelets are stopped (so none registers again),
	// then their Node objects and the bootstrap token go, through the admin kubeconfig `join` kept.
	var leaveErr error
	if st.Join != nil {
		leaveErr = leaveCluster(st, out)
		did = true
	}

	// Whatever a node still runs is in its cgroup (package nodens): the program containers runc started for
	// cri-fake (after a kill -9 of cri-fake they still run), and anything they started.
	for _, cg := range nodens.Cgroups(prefix) {
		if n := cgrouptree.Kill(cg); n > 0 {
			did = true
		}
	}
	// What the nodes' runc made for program containers (cri-fake/oci): their runc state and bundles, and
	// what remains of their cgroups.
	for _, nd := range nodeDirs(dir) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		view := "/"
		if nodens.NSInode(nodens.CgroupNS(nd)) != 0 {
			view = nodens.NodeCgroup(prefix, filepath.Base(nd)) // its cri-fake's cgroup namespace (package nodens)
		}
		err := oci.CleanupIn(ctx, filepath.Join(nd, "cri", "oci"), cmp.Or(st.Runc, "runc"), view)
		cancel()
		if err != nil {
			return fmt.Errorf("program containers of %s: %w", filepath.Base(nd), err)
		}
	}
	// Each node's mount namespace, found by the layout of dir (not by the state file).
	for _, nd := range nodeDirs(dir) {
		m, err := nodens.ClearMountNS(nd)
		if err != nil {
			return err
		}
		did = did || m > 0
	}

	// Deepest first: a mount under another must go before it.
	for i := 0; i < 5; i++ {
		m := nodens.MountsUnder(dir)
		if len(m) == 0 {
			break
		}
		did = true
		sort.Slice(m, func(a, b int) bool { return len(m[a]) > len(m[b]) })
		for _, p := range m {
			unix.Unmount(p, unix.MNT_DETACH)
		}
	}
	if m := nodens.MountsUnder(dir); len(m) > 0 {
		return fmt.Errorf("mounts left under %s: %s", dir, strings.Join(m, ", "))
	}

	names := append([]string{}, st.Netns...)
	if entries, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if !strings.HasPrefix(n, prefix+"-") {
			if slices.Contains(st.Netns, n) {
				fmt.Fprintf(out, "not deleting network namespace %s: the state file names it, but this cluster's are named %s-*\n", n, prefix)
			}
			continue
		}
		if _, err := os.Stat(nsPath(n)); err != nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns del %s: %v: %s", n, err, strings.TrimSpace(string(out)))
		}
		did = true
	}

	// The nodes' cgroup roots, once no kubelet makes pod cgroups in them.
	for _, cg := range nodens.Cgroups(prefix) { // the prefix derived from dir, never the file's
		if err := cgrouptree.Remove(cg); err != nil {
			return fmt.Errorf("removing the cgroup %s: %w", cg, err)
		}
		did = true
	}

	if leaveErr != nil {
		// Everything else is stopped and gone; the state stays so that another `down` retries this.
		return leaveErr
	}

	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if did {
		fmt.Fprintf(out, "cluster in %s stopped: %d process(es), its network namespaces and mounts are gone (logs kept in %s)\n",
			dir, n, filepath.Join(dir, "logs"))
	} else {
		fmt.Fprintf(out, "no cluster running in %s: nothing to stop\n", dir)
	}
	return nil
}

// nodeDirs are the nodes' directories under the cluster's (DIR/nodes/NODE), whether or not the state
// file still lists them.
func nodeDirs(dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, "nodes"))
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, "nodes", e.Name()))
		}
	}
	return out
}

// stop sends TERM to each process, waits for all of them up to stopGrace, then KILLs what is left, and
// returns the names of those. Each was started in a session of its own, so its process group is its pid:
// children it forked go too.
func stop(procs []Process, dir string) (killed []string) {
	alive := func(p Process) bool { return p.ours(dir) == nil }
	for _, p := range procs {
		syscall.Kill(-p.PID, syscall.SIGTERM)
		syscall.Kill(p.PID, syscall.SIGTERM)
	}
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		running := 0
		for _, p := range procs {
			if alive(p) {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range procs {
		if alive(p) {
			syscall.Kill(-p.PID, syscall.SIGKILL)
			syscall.Kill(p.PID, syscall.SIGKILL)
			killed = append(killed, p.Name)
		}
	}
	for end := time.Now().Add(stopGrace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		left := false
		for _, p := range procs {
			left = left || alive(p)
		}
		if !left {
			return killed
		}
	}
	return killed
}

// leaveCluster deletes a joining machine's Node objects and its bootstrap token from the cluster it
// joined. Objects already gone are fine; a cluster that cannot be reached is an error that names what is
// left, so a second `down` can try again (the state file stays until then).
func leaveCluster(st *State, out io.Writer) error {
	kc, err := readKubeconfig(st.Join.Kubeconfig)
	if err != nil {
		return fmt.Errorf("leaving the cluster: %w (%w)", errNotJoined, err)
	}
	var names []string
	for _, n := range st.Nodes {
		if _, err := send(kc.client, "DELETE", kc.server+"/api/v1/nodes/"+n.Name, nil, http.StatusNotFound); err != nil {
			return fmt.Errorf("leaving the cluster: delete node %s: %w", n.Name, err)
		}
		names = append(names, n.Name)
	}
	if st.Join.TokenID != "" {
		if _, err := send(kc.client, "DELETE", kc.server+"/api/v1/namespaces/kube-system/secrets/bootstrap-token-"+st.Join.TokenID, nil, http.StatusNotFound); err != nil {
			return fmt.Errorf("leaving the cluster: delete the bootstrap token: %w", err)
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(out, "left the cluster %s: deleted node(s) %s and bootstrap token %s\n", kc.server, strings.Join(names, ", "), st.Join.TokenID)
	}
	return nil
}

// ClusterCgroups lists the cgroups the cluster in dir left on the machine (none once `down` ran).
func ClusterCgroups(dir string) []string { return nodens.Cgroups(PrefixFor(dir)) }
