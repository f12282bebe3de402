package oci_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/oci"
	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/internal/testbin"
)

const progImage = "plugsim.dev/test/progtest:1"

// progtest builds testdata/progtest once per test binary, static as program images' binaries are.
var progtest = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "progtest-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "progtest"), "./testdata/progtest")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return dir, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// node is a cri-fake with program containers, served in this process.
type node struct {
	srv     *server.Server
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	root    string
	cgroup  string
	runcBin string
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("program containers need root (runc makes namespaces, mounts and cgroups)")
	}
}

// catalog is the built-in catalog plus the test program's image.
func catalog(t testing.TB) *images.Catalog {
	t.Helper()
	c, err := images.NewCatalog(images.DefaultPullLatency, append(images.Builtin(), images.CatalogImage{
		Repositories: []string{"plugsim.dev/test/progtest"}, Tags: []string{"1"}, User: "0",
		Entrypoint: []string{"/progtest"}, Program: &images.Program{Binary: "progtest", Path: "/progtest", Dirs: []string{"/data"}},
	})...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startNode(t testing.TB, mod func(*server.Options)) *node {
	t.Helper()
	needRoot(t)
	runcBin := testbin.Path(t, "runc")
	progDir, err := progtest()
	if err != nil {
		t.Fatalf("build the test program: %v", err)
	}
	var b [4]byte
	rand.Read(b[:])
	n := &node{root: t.TempDir(), cgroup: "plugsim-oci-test-" + hex.EncodeToString(b[:]), runcBin: runcBin}
	opts := server.Options{RootDir: n.root, NetNS: "real", Runc: runcBin, ProgramDir: progDir, Catalog: catalog(t),
		CgroupParent: n.cgroup, RuntimeHandlers: []string{"runc", "plugsim-gvisor"}, Logf: t.Logf}
	if mod != nil {
		mod(&opts)
	}
	n.start(t, opts)
	return n
}

func (n *node) start(t testing.TB, opts server.Options) {
	t.Helper()
	srv, err := server.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	t.Cleanup(func() {
		// Every pod stopped and removed: their network namespaces are bind mounts in the root.
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if pods, err := rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			for _, p := range pods.GetItems() {
				rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.GetId()})
				rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.GetId()})
			}
		}
		conn.Close()
		srv.Close()
	})
	n.srv, n.rt, n.img = srv, rt, runtimeapi.NewImageServiceClient(conn)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// pod runs a sandbox (handler runc unless given) with a log directory.
func (n *node) pod(t testing.TB, name string, mod func(*runtimeapi.PodSandboxConfig)) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"},
		Hostname:     name,
		LogDirectory: filepath.Join(n.root, "pods", name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{}}},
	}
	handler := "runc"
	if mod != nil {
		mod(cfg)
		if h := cfg.Annotations["test/handler"]; h != "" {
			handler = h
		}
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := n.rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPodSandboxId(), cfg
}

func (n *node) pull(t testing.TB, image string) {
	t.Helper()
	if _, err := n.img.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
}

// container creates a container of the test program with args (or of image, when the config
// names another) and returns its ID and create error.
func (n *node) create(t testing.TB, pod string, podCfg *runtimeapi.PodSandboxConfig, name string, mod func(*runtimeapi.ContainerConfig), args ...string) (string, error) {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: progImage},
		Args:     args,
		LogPath:  name + ".log",
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{}}},
	}
	if mod != nil {
		mod(cfg)
	}
	n.pull(t, cfg.Image.Image)
	resp, err := n.rt.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg, SandboxConfig: podCfg})
	return resp.GetContainerId(), err
}

func (n *node) run(t testing.TB, pod string, podCfg *runtimeapi.PodSandboxConfig, name string, mod func(*runtimeapi.ContainerConfig), args ...string) string {
	t.Helper()
	id, err := n.create(t, pod, podCfg, name, mod, args...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (n *node) status(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := n.rt.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetStatus()
}

// waitExited waits (generously) until the container has exited and returns its status.
func (n *node) waitExited(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st := n.status(t, id)
		if st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %v after 90 s", id, st.GetState())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond (generously) until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after 90 s waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runcList is what runc knows under the node's runc root.
func (n *node) runcList(t testing.TB) []oci.State {
	t.Helper()
	r := &oci.Runc{Binary: n.runcBin, Root: filepath.Join(n.root, "oci", "runc")}
	list, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func readLog(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// logHas tells whether a CRI log holds a full line of stream with content.
func logHas(log, stream, content string) bool {
	for _, line := range strings.Split(log, "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) == 4 && f[1] == stream && f[2] == "F" && f[3] == content {
			return true
		}
	}
	return false
}
