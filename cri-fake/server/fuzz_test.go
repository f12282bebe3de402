package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/internal/callfuzz"
)

// criCodes are the codes cri-fake documents for refusing a well-typed request (containerd's, see
// cri-fake/README.md): anything else, Unknown above all (an error that is not a status), is a bug.
var criCodes = map[codes.Code]bool{
	codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.AlreadyExists: true,
	codes.FailedPrecondition: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
	codes.Unimplemented: true, codes.OutOfRange: true,
}

// criProgram runs a fuzzed sequence of CRI calls against one in-process cri-fake. Each byte of
// prog picks a call; the next one picks its target among the IDs handed out so far, or the
// fuzzed name (a hostile ID, a prefix, an empty string). name and cmd are fuzzed strings that
// go into names, images, filters and ExecSync's command.
type criProgram struct {
	callfuzz.Program
	t      *testing.T
	rt     runtimeapi.RuntimeServiceClient
	img    runtimeapi.ImageServiceClient
	cmd    string
	pods   []string
	ctrs   []string
	images []string
}

func (p *criProgram) step(ctx context.Context) {
	switch op := p.Next() % 14; op {
	case 0:
		r, err := p.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Str(), Namespace: p.Str(), Uid: p.Str(), Attempt: uint32(p.Next() % 3)},
			Hostname: p.Str(),
			LogDirectory: func() string {
				if p.Next()%3 == 0 {
					return p.Name
				}
				return ""
			}(),
			Labels:      map[string]string{p.Str(): p.Str()},
			Annotations: map[string]string{"kubernetes.io/ingress-bandwidth": p.Str()},
		}})
		callfuzz.Check(p.t, "RunPodSandbox", err, criCodes)
		if err == nil {
			p.pods = append(p.pods, r.PodSandboxId)
		}
	case 1:
		_, err := p.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Pick(p.pods)})
		callfuzz.Check(p.t, "StopPodSandbox", err, criCodes)
	case 2:
		_, err := p.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Pick(p.pods)})
		callfuzz.Check(p.t, "RemovePodSandbox", err, criCodes)
	case 3:
		image := "busybox"
		if p.Next()%4 == 0 {
			image = p.Name
		}
		args := []string{"sleep", "3600"}
		if p.Next()%3 == 0 {
			args = []string{"sh", "-c", p.cmd}
		}
		sb := p.Pick(p.pods)
		r, err := p.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: p.Str()},
				Image: &runtimeapi.ImageSpec{Image: image}, Command: args[:1], Args: args[1:], LogPath: p.Str(),
				WorkingDir: p.Str(), Envs: []*runtimeapi.KeyValue{{Key: p.Str(), Value: []byte(p.Str())}}},
			SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "x", Namespace: "y", Uid: "z"}}})
		callfuzz.Check(p.t, "CreateContainer", err, criCodes)
		if err == nil {
			p.ctrs = append(p.ctrs, r.ContainerId)
		}
	case 4:
		_, err := p.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: p.Pick(p.ctrs)})
		callfuzz.Check(p.t, "StartContainer", err, criCodes)
	case 5:
		_, err := p.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: p.Pick(p.ctrs), Timeout: int64(p.Next()%2) - 1})
		callfuzz.Check(p.t, "StopContainer", err, criCodes)
	case 6:
		_, err := p.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: p.Pick(p.ctrs)})
		callfuzz.Check(p.t, "RemoveContainer", err, criCodes)
	case 7:
		ref := p.Name
		if p.Next()%2 == 0 {
			ref = []string{"busybox", "nginx:latest", "registry.k8s.io/pause:3.10"}[p.Next()%3]
		}
		r, err := p.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref},
			Auth: &runtimeapi.AuthConfig{Username: p.Str(), Password: p.Str()}})
		callfuzz.Check(p.t, "PullImage", err, criCodes)
		if err == nil {
			p.images = append(p.images, r.ImageRef)
		}
	case 8:
		_, err := p.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: p.Pick(p.images)}})
		callfuzz.Check(p.t, "RemoveImage", err, criCodes)
	case 9:
		_, err := p.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.Pick(p.ctrs), Verbose: p.Next()%2 == 0})
		callfuzz.Check(p.t, "ContainerStatus", err, criCodes)
	case 10:
		_, err := p.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.Pick(p.pods), Verbose: p.Next()%2 == 0})
		callfuzz.Check(p.t, "PodSandboxStatus", err, criCodes)
	case 11:
		_, err := p.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: p.Pick(p.ctrs), Cmd: []string{"sh", "-c", p.cmd}, Timeout: 1})
		callfuzz.Check(p.t, "ExecSync", err, criCodes)
	case 12:
		_, err := p.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: p.Pick(p.ctrs),
			Linux: &runtimeapi.LinuxContainerResources{CpuShares: int64(p.Next()) - 128, MemoryLimitInBytes: int64(p.Next()) << 56}})
		callfuzz.Check(p.t, "UpdateContainerResources", err, criCodes)
	case 13:
		_, err := p.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: p.Pick(p.images)}})
		callfuzz.Check(p.t, "ImageStatus", err, criCodes)
		_, err = p.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: p.Name, PodSandboxId: p.Name,
			LabelSelector: map[string]string{p.Name: p.cmd}}})
		callfuzz.Check(p.t, "ListContainers", err, criCodes)
	}
}

// consistent checks that the lists and the status calls agree: every listed sandbox and
// container has a status with the same state, and every ID handed out is either listed or gone
// (NotFound), never answered otherwise.
func (p *criProgram) consistent(ctx context.Context) {
	pods, err := p.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		p.t.Fatalf("ListPodSandbox: %v", err)
	}
	listed := map[string]bool{}
	for _, sb := range pods.Items {
		listed[sb.Id] = true
		st, err := p.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
		if err != nil || st.Status.State != sb.State || st.Status.Id != sb.Id {
			p.t.Fatalf("sandbox %s listed %s, status %v %v", sb.Id, sb.State, st.GetStatus().GetState(), err)
		}
	}
	for _, id := range p.pods {
		if _, err := p.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id}); !listed[id] && status.Code(err) != codes.NotFound {
			p.t.Fatalf("sandbox %s not listed, status answers %v", id, err)
		}
	}
	ctrs, err := p.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		p.t.Fatalf("ListContainers: %v", err)
	}
	listed = map[string]bool{}
	for _, c := range ctrs.Containers {
		listed[c.Id] = true
		if !slicesContains(pods.Items, c.PodSandboxId) {
			p.t.Fatalf("container %s listed in sandbox %s, which is not", c.Id, c.PodSandboxId)
		}
		st, err := p.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil || st.Status.Id != c.Id {
			p.t.Fatalf("container %s listed, status %v", c.Id, err)
		}
		// A container may exit between the two calls (its command ended): only that move is allowed.
		if st.Status.State != c.State && !(c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED) {
			p.t.Fatalf("container %s listed %s, status %s", c.Id, c.State, st.Status.State)
		}
	}
	for _, id := range p.ctrs {
		if _, err := p.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}); !listed[id] && status.Code(err) != codes.NotFound {
			p.t.Fatalf("container %s not listed, status answers %v", id, err)
		}
	}
}

func slicesContains(items []*runtimeapi.PodSandbox, id string) bool {
	for _, sb := range items {
		if sb.Id == id {
			return true
		}
	}
	return false
}

// FuzzCRI runs random well-typed CRI call sequences against an in-process cri-fake and checks
// the invariants after each: no panic (a panicking handler kills the fuzzing process), every
// error a gRPC status with a code cri-fake documents, and ListPodSandbox/ListContainers agreeing
// with the status calls; nothing is written outside the server's root directory.
func FuzzCRI(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 1, 3, 0, 1, 0, 0, 4, 0, 11, 0, 5, 0, 0, 6, 0, 1, 0, 2, 0}, "web", "echo hi; exit 3")
	f.Add([]byte{7, 0, 0, 7, 1, 2, 13, 0, 8, 0, 13, 0}, "sha256:", "")
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 0, 3, 1, 4, 0, 9, 1, 12, 0, 200, 255, 2, 0}, "../../etc", "kill -9 1")
	f.Add([]byte{3, 1, 4, 1, 11, 1, 6, 1, 2, 1}, "", "cat /dev/zero | head -c 100000000")
	f.Fuzz(func(t *testing.T, prog []byte, name, cmd string) {
		if len(prog) > 64 || len(name) > 512 || len(cmd) > 512 {
			return
		}
		root := t.TempDir()
		s, err := server.Start(server.Options{RootDir: filepath.Join(root, "root"), StreamingAddr: "none"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p := &criProgram{t: t, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn),
			Program: callfuzz.Program{Prog: prog, Name: callfuzz.WireString(name)}, cmd: callfuzz.WireString(cmd)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for p.More() {
			p.step(ctx)
		}
		p.consistent(ctx)
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if n := e.Name(); n != "root" {
				t.Fatalf("%s written beside the server's root", n)
			}
		}
	})
}

// FuzzStateDir: cri-fake --state-dir starting on records torn by a crash or edited by hand
// either refuses to start, naming the file at fault, or starts with a consistent state (every
// listed sandbox and container has a status that agrees), and then serves a pod lifecycle.
func FuzzStateDir(f *testing.F) {
	f.Add([]byte(`{"id":"s1","name":"p_ns_u_0","config":{"metadata":{"name":"p","namespace":"ns","uid":"u"}},"createdAt":1,"state":"SANDBOX_READY","ips":["10.88.0.2"]}`),
		[]byte(`{"id":"c1","name":"c_p_ns_u_0","sandboxId":"s1","config":{"metadata":{"name":"c"},"image":{"image":"busybox"},"command":["sleep","9"]},"imageId":"sha256:1","state":"CONTAINER_RUNNING","startedAt":2}`))
	f.Add([]byte(`{"id":"s1","name":"","config":{},"state":"SANDBOX_NOTREADY"}`), []byte(`{"id":"c1","sandboxId":"nope","config":{},"state":"CONTAINER_CREATED"}`))
	f.Add([]byte(`{"id":"../x","name":"a","config":{"metadata":{}},"state":"?"}`), []byte(`{"id":"c1","name":"c_p_ns_u_0","sandboxId":"s1","config":{"metadata":{"name":"c"}},"logPath":"/etc/passwd","state":"CONTAINER_EXITED"}`))
	f.Fuzz(func(t *testing.T, sandbox, container []byte) {
		root := t.TempDir()
		state := filepath.Join(root, "state")
		for p, b := range map[string][]byte{filepath.Join(state, "sandboxes", "s1.json"): sandbox, filepath.Join(state, "containers", "c1.json"): container} {
			os.MkdirAll(filepath.Dir(p), 0o700)
			os.WriteFile(p, b, 0o600)
		}
		s, err := server.Start(server.Options{RootDir: filepath.Join(root, "root"), StateDir: state, StreamingAddr: "none"})
		if err != nil {
			if !strings.Contains(err.Error(), state) {
				t.Fatalf("start refused without naming the file: %v", err)
			}
			return
		}
		defer s.Close()
		conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		p := &criProgram{t: t, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn),
			Program: callfuzz.Program{Prog: []byte{10, 0, 9, 0, 0, 0, 0, 0, 3, 1, 4, 1, 5, 1, 6, 1, 1, 1, 2, 1, 1, 0, 2, 0}, Name: "s1"}, cmd: "true"}
		p.pods, p.ctrs = []string{"s1"}, []string{"c1"}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.consistent(ctx)
		for p.More() {
			p.step(ctx)
		}
		p.consistent(ctx)
	})
}
