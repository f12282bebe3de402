package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/cgrouptree"
	"github.com/plugsim/plugsim/internal/localuser"
)

// victims starts a process and makes a network namespace that a planted state file will name; the
// test fails if either is gone when it ends.
func victims(t *testing.T) (Process, string) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (iproute2): the test makes a network namespace a state file names")
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	start, err := procStart(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "plugsim-victim-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	p := Process{Name: "node1-kubelet", PID: sleep.Process.Pid, Start: start}
	t.Cleanup(func() {
		if s, err := procStart(p.PID); err != nil || s != p.Start {
			t.Errorf("the process the state file named (pid %d) was stopped", p.PID)
		}
		if _, err := os.Stat(nsPath(ns)); err != nil {
			t.Errorf("the network namespace the state file named, %s, was deleted", ns)
		}
	})
	return p, ns
}

// Issue 24, 1: another user writes cluster.json naming another process's pid and start time and any
// network namespace. In the user's directory, root's `cluster down` and `cluster up` (which tears down
// first) refuse the directory, naming the user and the mode; in root's own (a stale or edited file),
// `down` signals only processes that are still the cluster's (working in its directory) and deletes
// only namespaces named for that directory. Either way the process and the namespace live on.
func TestDownActsOnlyOnWhatIsTheClusters(t *testing.T) {
	u := localuser.New(t)
	p, ns := victims(t)
	st, _ := json.Marshal(State{Prefix: "plugsim-victim", Netns: []string{ns}, Procs: []Process{p}})

	dir := localuser.TempDir(t, "plugsim-cluster")
	u.Shell(t, "mkdir "+dir+" && touch "+dir+"/"+markerFile+" && cat > "+dir+"/"+StateFile+" <<'EOF'\n"+string(st)+"\nEOF")
	for name, err := range map[string]error{
		"down": Down(dir, os.Stdout),
		"up":   Up(Options{Dir: dir, Nodes: 1, BinDir: t.TempDir()}),
	} {
		if err == nil || !strings.Contains(err.Error(), "refusing state directory "+dir) || !strings.Contains(err.Error(), u.Name) || !strings.Contains(err.Error(), "mode d") {
			t.Errorf("cluster %s on the other user's directory: %v, want a refusal naming %s and the mode", name, err, u.Name)
		}
	}

	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, StateFile), st, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Down(own, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not stopping node1-kubelet: pid", "works in", "not deleting network namespace " + ns} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("down's output lacks %q:\n%s", want, out.String())
		}
	}
}

// Issue 24, 6: a node's mount namespace. /var/lib/kubelet there is the node's own directory, so its
// kubelet's device-plugins socket lands in DIR/nodes/NODE, not in the host's /var/lib/kubelet shared by
// every node; what a process mounts there stays there; and clearing it kills what still runs in it and
// takes its mounts, after which the kernel frees it.
func TestNodeMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a mount namespace")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no nsenter (util-linux)")
	}
	dir := t.TempDir()
	nd := filepath.Join(dir, "nodes", "node1")
	if err := os.MkdirAll(nd, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range mountsUnder(dir) {
			exec.Command("umount", "-l", m).Run()
		}
	})
	if err := makeNodeMountNS(nd, ""); err != nil {
		t.Fatal(err)
	}
	ino := nsInode(nodeMountNS(nd))
	if ino == 0 {
		t.Fatal("no namespace pinned")
	}
	inNode := func(script string) string {
		out, err := exec.Command("nsenter", "--mount="+nodeMountNS(nd), "--wd="+dir, "--", "sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("in the node: %s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	marker := "plugsim-test-" + filepath.Base(dir)
	inNode("mkdir -p /var/lib/kubelet/device-plugins && touch /var/lib/kubelet/device-plugins/" + marker + " && mkdir -p " + nd + "/vol && mount -t tmpfs tmpfs " + nd + "/vol && pwd")
	if _, err := os.Stat(filepath.Join(nodeKubeletFixed(nd), "device-plugins", marker)); err != nil {
		t.Errorf("the node's /var/lib/kubelet is not its own directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(kubeletFixedDir, "device-plugins", marker)); err == nil {
		os.Remove(filepath.Join(kubeletFixedDir, "device-plugins", marker))
		t.Error("the file went to the host's /var/lib/kubelet")
	}
	for _, m := range mountsUnder(dir) {
		if strings.HasSuffix(m, "/vol") {
			t.Errorf("the node's tmpfs is visible on the host: %s", m)
		}
	}
	if cwd := strings.TrimSpace(inNode("pwd")); cwd != dir {
		t.Errorf("nsenter --wd: working in %s, want %s", cwd, dir)
	}
	// Something left running in it.
	sleep := exec.Command("nsenter", "--mount="+nodeMountNS(nd), "--", "sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	go sleep.Wait()
	for deadline := time.Now().Add(time.Minute); len(inNamespace(ino)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process never entered the node's namespace")
		}
	}
	n, err := clearNodeMountNS(nd)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 || len(inNamespace(ino)) != 0 {
		t.Errorf("cleared %d mounts (want the tmpfs and /var/lib/kubelet at least); still in it: %v", n, inNamespace(ino))
	}
	for _, m := range mountsUnder(dir) {
		exec.Command("umount", "-l", m).Run()
	}
	if nsInode(nodeMountNS(nd)) != 0 || len(mountsUnder(dir)) != 0 {
		t.Errorf("the namespace is still pinned: %v", mountsUnder(dir))
	}
}

// A node's cgroup namespace (cgroups.go): a program started as startNodeProc starts it is in its service
// cgroup of the node, which it sees as /system.slice/NAME.service; the node's /sys/fs/cgroup shows the
// node's cgroup as the root, with nothing of the machine's beside it; a cgroup made there is made below the
// node's on the machine; and killing and removing the node's tree leaves nothing.
func TestNodeCgroupNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups and namespaces")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no nsenter (util-linux)")
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	nd := filepath.Join(dir, "nodes", "node1")
	if err := os.MkdirAll(nd, 0o700); err != nil {
		t.Fatal(err)
	}
	cg := "/plugsim-test-" + filepath.Base(filepath.Dir(dir)) + "-node1" // t.TempDir's parent is unique
	t.Cleanup(func() {
		for _, m := range mountsUnder(dir) {
			exec.Command("umount", "-l", m).Run()
		}
		for _, h := range hs {
			cgrouptree.Kill(filepath.Join(h.MountPoint, cg))
			cgrouptree.Remove(filepath.Join(h.MountPoint, cg))
		}
	})
	if err := makeNodeCgroup(cg); err != nil {
		t.Fatal(err)
	}
	if err := makeNodeMountNS(nd, cg); err != nil {
		t.Fatal(err)
	}
	argv, err := inCgroup(cg+"/"+serviceCgroup("kubelet"), []string{"nsenter", "--mount=" + nodeMountNS(nd), "--cgroup=" + nodeCgroupNS(nd), "--",
		"sh", "-c", "cat /proc/self/cgroup; echo ---; ls " + hs[0].MountPoint + "; mkdir " + hs[0].MountPoint + "/kubepods"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	own, listing, _ := strings.Cut(string(out), "---\n")
	for l := range strings.SplitSeq(strings.TrimSpace(own), "\n") {
		if !strings.HasSuffix(l, ":/system.slice/kubelet.service") {
			t.Errorf("in the node, /proc/self/cgroup has %q; want every hierarchy at /system.slice/kubelet.service", l)
		}
	}
	if !strings.Contains(listing, "system.slice") || strings.Contains(listing, "plugsim-") {
		t.Errorf("the node's %s lists:\n%s\nwant its own system.slice and no cgroup of the machine's", hs[0].MountPoint, listing)
	}
	if _, err := os.Stat(filepath.Join(hs[0].MountPoint, cg, "kubepods")); err != nil {
		t.Errorf("a cgroup made in the node is not below the node's cgroup on the machine: %v", err)
	}
	// Something left running in the node's cgroup.
	argv, err = inCgroup(cg+"/"+serviceCgroup("cri-fake"), []string{"sleep", "600"})
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command(argv[0], argv[1:]...)
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	procs := filepath.Join(hs[0].MountPoint, cg, serviceCgroup("cri-fake"), "cgroup.procs")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(procs); strings.TrimSpace(string(b)) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process never entered its cgroup")
		}
	}
	if n := cgrouptree.Kill(filepath.Join(hs[0].MountPoint, cg)); n != 1 {
		t.Errorf("killed %d processes in the node's cgroup, want the one sleep", n)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the sleep outlived its kill")
	}
	for _, m := range mountsUnder(dir) {
		exec.Command("umount", "-l", m).Run()
	}
	for _, h := range hs {
		if err := cgrouptree.Remove(filepath.Join(h.MountPoint, cg)); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(h.MountPoint, cg)); err == nil {
			t.Errorf("%s is left", filepath.Join(h.MountPoint, cg))
		}
	}
}
