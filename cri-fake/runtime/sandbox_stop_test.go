package runtime

import (
	"context"
	"errors"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStopPodSandbox(t *testing.T) {
	net := &recordingNetwork{}
	s := newService(t, func(o *Options) { o.Network = net })
	id := runPod(t, s, "web")
	ctr := createContainer(t, s, id, "app")
	startContainer(t, s, ctr)
	nsPath := sandboxNetNS(t, s, id)
	if _, err := os.Stat(nsPath); err != nil {
		t.Fatalf("netns file missing while READY: %v", err)
	}

	for i := range 2 { // the second stop must be a no-op that succeeds
		if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("stop #%d: %v", i+1, err)
		}
	}
	if st := sandboxState(t, s, id); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || st.Network.GetIp() != "" {
		t.Fatalf("after stop: state %v ip %q", st.State, st.Network.GetIp())
	}
	c := containerState(t, s, ctr)
	if c.State != runtimeapi.ContainerState_CONTAINER_EXITED || c.ExitCode != 137 || c.Reason != "Error" {
		t.Fatalf("container not killed by StopPodSandbox: %v exit %d %q", c.State, c.ExitCode, c.Reason)
	}
	if len(net.dels) != 1 || net.dels[0].ID != id || net.dels[0].NetNS != nsPath {
		t.Fatalf("want one DEL for %s in %s, got %+v", id, nsPath, net.dels)
	}
	if _, err := os.Stat(nsPath); !os.IsNotExist(err) {
		t.Fatalf("netns file still there after stop: %v", err)
	}
}

func sandboxNetNS(t testing.TB, s *Service, id string) string {
	sb, err := s.sandboxes.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.NetNS
}

func TestStopPodSandboxNotFoundIsOK(t *testing.T) {
	s := newService(t)
	_, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: "does-not-exist"})
	wantCode(t, err, codes.OK)
}

func TestStopPodSandboxTeardownFailureIsRetried(t *testing.T) {
	net := &recordingNetwork{teardownErr: errors.New("DEL failed")}
	s := newService(t, func(o *Options) { o.Network = net })
	id := runPod(t, s, "web")
	_, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	wantCode(t, err, codes.Unknown)
	net.teardownErr = nil
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if len(net.dels) != 2 {
		t.Fatalf("the failed DEL was not retried: %d DELs", len(net.dels))
	}
}

func TestRemovePodSandbox(t *testing.T) {
	s := newService(t)
	id := runPod(t, s, "web")
	ctr := createContainer(t, s, id, "app")
	startContainer(t, s, ctr)
	// A READY sandbox with a running container is stopped and removed with its containers.
	if _, err := s.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	_, err := s.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)
	_, err = s.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: ctr})
	wantCode(t, err, codes.NotFound)
	// Idempotent.
	_, err = s.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	wantCode(t, err, codes.OK)
}

func TestPodSandboxStatusErrors(t *testing.T) {
	s := newService(t)
	a := runPod(t, s, "a")
	for _, tc := range []struct {
		name, id string
		want     codes.Code
	}{
		{"unknown", "nope", codes.NotFound},
		{"empty", "", codes.NotFound},
		{"full id", a, codes.OK},
		{"unique prefix", a[:12], codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: tc.id})
			wantCode(t, err, tc.want)
		})
	}
}

func TestPodSandboxStatusVerbose(t *testing.T) {
	s := newService(t)
	id := runPod(t, s, "v")
	createContainer(t, s, id, "c")
	resp, err := s.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Info["info"] == "" {
		t.Fatalf("verbose status lacks info: %v", resp)
	}
	// containerd's answer: no container statuses and no timestamp (the kubelet's evented PLEG
	// then lists the containers itself).
	if resp.Timestamp != 0 || len(resp.ContainersStatuses) != 0 {
		t.Fatalf("status carries evented-PLEG fields containerd does not send: timestamp %d, %d container statuses", resp.Timestamp, len(resp.ContainersStatuses))
	}
}
