package oci_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/server"
)

// TestEscapesRefused tries what a pod could use to reach the host through a program container:
// mounts the kubelet could not have meant, a host binary as the command, a program outside the
// program directory, and a symlink its writable root leaves for the removal to follow.
func TestEscapesRefused(t *testing.T) {
	n := startNode(t, nil)
	pod, podCfg := n.pod(t, "escape", nil)
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mount *runtimeapi.Mount
		want  string
	}{
		{"container path with ..", &runtimeapi.Mount{ContainerPath: "/data/../../etc", HostPath: victim}, `".." element`},
		{"host path with ..", &runtimeapi.Mount{ContainerPath: "/data", HostPath: victim + "/../" + filepath.Base(victim)}, `".." element`},
		{"relative host path", &runtimeapi.Mount{ContainerPath: "/data", HostPath: "etc"}, "absolute"},
		{"missing host path", &runtimeapi.Mount{ContainerPath: "/data", HostPath: victim + "/nope"}, "cannot be resolved"},
		{"device node", &runtimeapi.Mount{ContainerPath: "/data/null", HostPath: "/dev/null"}, "device node"},
	} {
		_, err := n.create(t, pod, podCfg, "m-"+strings.ReplaceAll(tc.name, " ", "-"), func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{tc.mount}
		}, "print", "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CreateContainer %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}

	// A command naming a host binary: the root holds only the program.
	id, err := n.create(t, pod, podCfg, "shell", func(c *runtimeapi.ContainerConfig) { c.Command = []string{"/bin/sh", "-c", "id"} })
	if err == nil {
		_, err = n.rt.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	}
	if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a host binary as the command: %v, want runc's no such file", err)
	}

	// The writable root leaves a symlink to the victim; removing the container removes the link.
	id = n.run(t, pod, podCfg, "linker", nil, "print", "x")
	if res, err := n.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/progtest", "link", victim, "/data/evil"}, Timeout: 30}); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("link: %v %s", err, res.GetStderr())
	}
	n.rt.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10})
	n.waitExited(t, id)
	if _, err := n.rt.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(victim, "secret")); err != nil {
		t.Errorf("the victim's file after the removal: %v", err)
	}
}

// TestProgramOutsideProgramDir: a catalog program is a file name in the program directory; a
// path is refused when the catalog is built, and a symlink in the directory when a container
// would run it.
func TestProgramOutsideProgramDir(t *testing.T) {
	for _, bin := range []string{"../sh", "/bin/sh", "a/b", ".."} {
		_, err := images.NewCatalog(0, images.CatalogImage{Repositories: []string{"x/y"}, Program: &images.Program{Binary: bin, Path: "/p"}})
		if err == nil {
			t.Errorf("program binary %q accepted by the catalog", bin)
		}
	}
	dir := t.TempDir()
	if err := os.Symlink("/bin/sh", filepath.Join(dir, "progtest")); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(o *server.Options) { o.ProgramDir = dir })
	pod, podCfg := n.pod(t, "symlinked", nil)
	_, err := n.create(t, pod, podCfg, "c", nil, "print", "x")
	if err == nil || !strings.Contains(err.Error(), "not an executable regular file") {
		t.Errorf("a symlinked program: %v", err)
	}
}
