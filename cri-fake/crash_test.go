package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/crashtest"
)

// TestKill9UnderLoad starts the cri-fake binary on a state directory, has four clients run pods
// (RunPodSandbox, CreateContainer, and RemovePodSandbox of every third) concurrently, kills it with
// SIGKILL at a random moment, restarts it on the same --state-dir and --root-dir and checks: it
// starts (a torn state file would stop it, naming the file); every RunPodSandbox and
// CreateContainer answered OK before the kill is listed with the ID it was answered; a pod removed
// with an OK answer is gone; no ID is listed twice and no pod name is held by two sandboxes. A
// removal the kill cut may have removed the pod's containers and not the pod (as a kubelet does,
// it would send RemovePodSandbox again): either state of that pod is right.
// Rounds: 3 in `go test`, PLUGSIM_CRASH_CYCLES in `make soak`.
func TestKill9UnderLoad(t *testing.T) {
	cycles := crashtest.Cycles(3)
	bin := crashtest.Build(t, "cri-fake")
	dir := t.TempDir()
	state, root, sock := filepath.Join(dir, "state"), filepath.Join(dir, "root"), filepath.Join(dir, "cri.sock")
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	var mu sync.Mutex
	pods := map[string]string{}  // sandbox ID answered OK → pod name
	ctrs := map[string]string{}  // container ID answered OK → its sandbox ID
	removed := map[string]bool{} // sandbox IDs whose RemovePodSandbox was answered OK
	unsure := map[string]bool{}  // sandbox IDs whose RemovePodSandbox the kill cut: either state is right
	cut := map[string]bool{}     // sandboxes whose removal the kill cut: their containers may be gone either way
	for cycle := range cycles + 1 {
		os.Remove(sock)
		cmd := exec.Command(bin, "--endpoint", "unix://"+sock, "--state-dir", state, "--root-dir", root, "--cni-conf-dir", "", "--streaming-addr", "none")
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("cri-fake.%d.log", cycle)))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		rt := runtimeapi.NewRuntimeServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var list *runtimeapi.ListPodSandboxResponse
		for {
			list, err = rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}, grpc.WaitForReady(true))
			if err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-exited:
			default:
				continue
			}
			break
		}
		if err != nil {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("round %d: restarted cri-fake does not answer: %v\n%s", cycle, err, b)
		}
		clist, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil {
			t.Fatalf("round %d: ListContainers: %v", cycle, err)
		}
		have, names := map[string]bool{}, map[string]string{}
		for _, p := range list.Items {
			if have[p.Id] {
				t.Fatalf("round %d: sandbox %s listed twice", cycle, p.Id)
			}
			have[p.Id] = true
			n := p.Metadata.Namespace + "/" + p.Metadata.Name + "/" + strconv.Itoa(int(p.Metadata.Attempt))
			if other, dup := names[n]; dup {
				t.Fatalf("round %d: pod %s held by two sandboxes, %s and %s", cycle, n, other, p.Id)
			}
			names[n] = p.Id
		}
		haveCtr := map[string]bool{}
		for _, c := range clist.Containers {
			if haveCtr[c.Id] {
				t.Fatalf("round %d: container %s listed twice", cycle, c.Id)
			}
			haveCtr[c.Id] = true
		}
		for id, name := range pods {
			if unsure[id] {
				cut[id] = true
				delete(unsure, id)
				if !have[id] {
					removed[id] = true
				}
				continue
			}
			if !removed[id] && !have[id] {
				t.Fatalf("round %d: sandbox %s (%s) was run with an OK answer and is gone after kill -9", cycle, id, name)
			}
			if removed[id] && have[id] {
				t.Fatalf("round %d: sandbox %s was removed with an OK answer and is back", cycle, id)
			}
		}
		for id, sb := range ctrs {
			if !removed[sb] && !cut[sb] && have[sb] && !haveCtr[id] {
				t.Fatalf("round %d: container %s was created with an OK answer and is gone after kill -9", cycle, id)
			}
		}
		if cycle == cycles {
			cancel()
			conn.Close()
			cmd.Process.Kill()
			<-exited
			break
		}
		// The image the containers need is pulled once (it is kept in the state dir too).
		if cycle == 0 {
			if _, err := runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
				t.Fatal(err)
			}
		}
		crashtest.KillUnderLoad(4, rnd, func() { cmd.Process.Kill(); <-exited }, func(c, i int) bool {
			name := fmt.Sprintf("pod-%d-%d-%d", cycle, c, i)
			cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "crash", Uid: "uid-" + name}}
			r, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err != nil {
				return false // the server is gone
			}
			mu.Lock()
			pods[r.PodSandboxId] = name
			mu.Unlock()
			cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: r.PodSandboxId, SandboxConfig: cfg,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Command: []string{"sleep", "3600"}}})
			if err != nil {
				return false
			}
			mu.Lock()
			ctrs[cr.ContainerId] = r.PodSandboxId
			mu.Unlock()
			if i%3 == 0 {
				_, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: r.PodSandboxId})
				mu.Lock()
				if err == nil {
					removed[r.PodSandboxId] = true
				} else {
					unsure[r.PodSandboxId] = true
				}
				mu.Unlock()
			}
			return true
		})
		cancel()
		conn.Close()
	}
	t.Logf("%d kill -9 rounds under 4 concurrent clients: %d sandboxes and %d containers created with an OK answer (%d removed), all there after each restart",
		cycles, len(pods), len(ctrs), len(removed))
}
