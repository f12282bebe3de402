//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/server"
	"github.com/plugsim/plugsim/harness/trace"
)

// cri-fake runs the example chain through libcni the way containerd does (its placeholder network
// namespaces, containerd's CNI_ARGS and capability args). The pod gets cni-fake's address, and the
// plugin's own trace shows the ADD and DEL with the pod's name. No port mappings: in fake mode with
// a placeholder namespace, portmap's rules would land in this process's namespace.
func TestCRIFakeRunsTheChain(t *testing.T) {
	bin := binDir(t)
	dir := t.TempDir()
	confDir := filepath.Join(dir, "net.d")
	os.MkdirAll(confDir, 0o755)
	if err := os.WriteFile(filepath.Join(confDir, "10-plugsim.conflist"), conflist(t, "10-plugsim.conflist", dir, "fake", "plugsim-e2e-crifake"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(server.Options{RootDir: filepath.Join(dir, "root"), CNIConfDir: confDir, CNIBinDirs: []string{bin}, NetNS: "placeholder"})
	if err != nil {
		t.Fatalf("start cri-fake: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.NetworkReady && !c.GetStatus() {
			t.Fatalf("NetworkReady false: %s %s", c.GetReason(), c.GetMessage())
		}
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web"},
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local"}},
		Linux:     &runtimeapi.LinuxPodSandboxConfig{},
	}
	run, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	ps, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: run.GetPodSandboxId()})
	if err != nil {
		t.Fatal(err)
	}
	if ip := ps.GetStatus().GetNetwork().GetIp(); ip != "10.88.0.2" {
		t.Fatalf("pod IP %q, want cni-fake's first address 10.88.0.2", ip)
	}
	if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: run.GetPodSandboxId()}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	evs, err := trace.ReadFile(filepath.Join(dir, "cni.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var add, del *trace.Event
	for i := range evs {
		switch evs[i].Method {
		case "ADD":
			add = &evs[i]
		case "DEL":
			del = &evs[i]
		}
	}
	if add == nil || add.Code != "OK" || add.Caller != "cri-fake" || add.Attrs["pod"] != "default/web" || add.Attrs["containerID"] != run.GetPodSandboxId() {
		t.Fatalf("cni-fake's ADD event = %+v", add)
	}
	if del == nil || del.Code != "OK" || del.Attrs["released"] != "10.88.0.2" {
		t.Fatalf("cni-fake's DEL event = %+v", del)
	}
}
