package nodens

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugsim/plugsim/internal/cgrouptree"
)

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
		for _, m := range MountsUnder(dir) {
			exec.Command("umount", "-l", m).Run()
		}
	})
	if err := MakeMountNS(nd, ""); err != nil {
		t.Fatal(err)
	}
	ino := NSInode(MountNS(nd))
	if ino == 0 {
		t.Fatal("no namespace pinned")
	}
	inNode := func(script string) string {
		out, err := exec.Command("nsenter", "--mount="+MountNS(nd), "--wd="+dir, "--", "sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("in the node: %s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	marker := "plugsim-test-" + filepath.Base(dir)
	inNode("mkdir -p /var/lib/kubelet/device-plugins && touch /var/lib/kubelet/device-plugins/" + marker + " && mkdir -p " + nd + "/vol && mount -t tmpfs tmpfs " + nd + "/vol && pwd")
	if _, err := os.Stat(filepath.Join(KubeletFixed(nd), "device-plugins", marker)); err != nil {
		t.Errorf("the node's /var/lib/kubelet is not its own directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(KubeletFixedDir, "device-plugins", marker)); err == nil {
		os.Remove(filepath.Join(KubeletFixedDir, "device-plugins", marker))
		t.Error("the file went to the host's /var/lib/kubelet")
	}
	for _, m := range MountsUnder(dir) {
		if strings.HasSuffix(m, "/vol") {
			t.Errorf("the node's tmpfs is visible on the host: %s", m)
		}
	}
	if cwd := strings.TrimSpace(inNode("pwd")); cwd != dir {
		t.Errorf("nsenter --wd: working in %s, want %s", cwd, dir)
	}
	// Something left running in it.
	sleep := exec.Command("nsenter", "--mount="+MountNS(nd), "--", "sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	go sleep.Wait()
	for deadline := time.Now().Add(time.Minute); len(InNamespace(ino)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process never entered the node's namespace")
		}
	}
	n, err := ClearMountNS(nd)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 || len(InNamespace(ino)) != 0 {
		t.Errorf("cleared %d mounts (want the tmpfs and /var/lib/kubelet at least); still in it: %v", n, InNamespace(ino))
	}
	for _, m := range MountsUnder(dir) {
		exec.Command("umount", "-l", m).Run()
	}
	if NSInode(MountNS(nd)) != 0 || len(MountsUnder(dir)) != 0 {
		t.Errorf("the namespace is still pinned: %v", MountsUnder(dir))
	}
}

// A node's cgroup namespace (cgroups.go): a program started as the cluster's startNodeProc starts it is in its service
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
	hs, err := Hierarchies()
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
		for _, m := range MountsUnder(dir) {
			exec.Command("umount", "-l", m).Run()
		}
		for _, h := range hs {
			cgrouptree.Kill(filepath.Join(h.MountPoint, cg))
			cgrouptree.Remove(filepath.Join(h.MountPoint, cg))
		}
	})
	if err := MakeNodeCgroup(cg); err != nil {
		t.Fatal(err)
	}
	if err := MakeMountNS(nd, cg); err != nil {
		t.Fatal(err)
	}
	argv, err := InCgroup(cg+"/"+ServiceCgroup("kubelet"), []string{"nsenter", "--mount=" + MountNS(nd), "--cgroup=" + CgroupNS(nd), "--",
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
	argv, err = InCgroup(cg+"/"+ServiceCgroup("cri-fake"), []string{"sleep", "600"})
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command(argv[0], argv[1:]...)
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	procs := filepath.Join(hs[0].MountPoint, cg, ServiceCgroup("cri-fake"), "cgroup.procs")
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
	for _, m := range MountsUnder(dir) {
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
