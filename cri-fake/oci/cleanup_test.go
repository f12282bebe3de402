package oci_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/oci"
	"github.com/plugsim/plugsim/internal/testbin"
)

// TestKill9ThenCleanup: a cri-fake killed with SIGKILL leaves its program containers running
// (as containerd's shims outlive containerd); oci.Cleanup, what `harness cluster down` runs,
// then leaves no runc container, process, bundle or cgroup.
func TestKill9ThenCleanup(t *testing.T) {
	needRoot(t)
	bin := testbin.Dir(t, "cri-fake", "runc")
	progDir, err := progtest()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	catalog := filepath.Join(root, "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(`images:
- repositories: [plugsim.dev/test/progtest]
  tags: ["1"]
  entrypoint: [/progtest]
  program: {binary: progtest, path: /progtest}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "cri.sock")
	cgroup := fmt.Sprintf("plugsim-oci-kill9-%d", os.Getpid())
	cmd := exec.Command(filepath.Join(bin, "cri-fake"), "--endpoint", "unix://"+sock, "--root-dir", filepath.Join(root, "r"),
		"--state-dir", filepath.Join(root, "state"), "--netns", "real", "--cni-conf-dir", "", "--image-catalog", catalog,
		"--runc", filepath.Join(bin, "runc"), "--program-dir", progDir, "--cgroup-parent", cgroup, "--streaming-addr", "none")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
		ns := network.NetNSManager{Dir: filepath.Join(root, "r", "netns"), Mode: network.NetNSReal}
		ents, _ := os.ReadDir(ns.Dir)
		for _, e := range ents {
			ns.Remove(filepath.Join(ns.Dir, e.Name()))
		}
	})
	waitFor(t, "cri-fake's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := &node{rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), root: filepath.Join(root, "r"), runcBin: filepath.Join(bin, "runc")}
	pod, podCfg := n.pod(t, "doomed", nil)
	id := n.run(t, pod, podCfg, "survivor", nil, "print", "x")
	pid, err := n.runcPid(t, id)
	if err != nil {
		t.Fatal(err)
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed = true
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("the program died with cri-fake: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := oci.Cleanup(ctx, filepath.Join(root, "r", "oci"), filepath.Join(bin, "runc")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the program's end", func() bool {
		// Gone, or a zombie: its parent is now init, or this test binary when an earlier test made
		// it a subreaper (oci.New), which never waits for it.
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true
		}
		_, rest, _ := strings.Cut(string(st), ") ")
		return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
	})
	if list := n.runcList(t); len(list) != 0 {
		t.Errorf("runc containers left: %+v", list)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "r", "oci", "bundles")); len(ents) != 0 {
		t.Errorf("bundles left: %v", ents)
	}
	left, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroup)
	deeper, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/" + cgroup)
	if len(left)+len(deeper) != 0 {
		t.Errorf("cgroups left: %v %v", left, deeper)
	}
}
