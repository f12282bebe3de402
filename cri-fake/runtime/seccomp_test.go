package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// seccompContainer creates a busybox container with seccomp profile sp and SYS_ADMIN, as
// critest's SeccompProfilePath specs do.
func seccompContainer(t *testing.T, s *Service, pod, name string, sp *runtimeapi.SecurityProfile) (string, error) {
	t.Helper()
	cfg := containerConfig(name)
	cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}, Seccomp: sp}}
	resp, err := s.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: pod, Config: cfg})
	return resp.GetContainerId(), err
}

func profileFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The profile is read at CreateContainer: one that cannot be read or parsed fails it with
// containerd's code and words, and changing the file later changes nothing; one runc would
// refuse fails StartContainer, leaving the container EXITED with StartError.
func TestSeccompCreateAndStart(t *testing.T) {
	s := newService(t)
	pod, _ := simPodRun(t, s, "seccomp")

	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err := seccompContainer(t, s, pod, "missing", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: missing})
	wantCode(t, err, codes.Unknown)
	if want := `failed to generate container "missing" spec: cannot load seccomp profile "` + missing + `": open ` + missing + `: no such file or directory`; !strings.Contains(err.Error(), want) {
		t.Errorf("CreateContainer with a missing profile: %v; want %q", err, want)
	}
	_, err = seccompContainer(t, s, pod, "garbled", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: profileFile(t, `{"syscalls": 1}`)})
	wantCode(t, err, codes.Unknown)
	if !strings.Contains(err.Error(), "decoding seccomp profile failed") {
		t.Errorf("CreateContainer with a garbled profile: %v", err)
	}

	refused, err := seccompContainer(t, s, pod, "refused", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: profileFile(t, `{"defaultAction": "SCMP_ACT_DENY"}`)})
	if err != nil {
		t.Fatalf("CreateContainer with a profile only runc refuses: %v", err)
	}
	_, err = s.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: refused})
	wantCode(t, err, codes.Unknown)
	if want := "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: string SCMP_ACT_DENY is not a valid action for seccomp: unknown"; !strings.Contains(err.Error(), want) {
		t.Errorf("StartContainer with a refused profile: %v; want %q", err, want)
	}
	if st := containerState(t, s, refused); st.ExitCode != 128 || st.Reason != "StartError" {
		t.Errorf("after a refused profile: %d %q", st.ExitCode, st.Reason)
	}

	path := profileFile(t, `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]}`)
	blocked, err := seccompContainer(t, s, pod, "blocked", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o600); err != nil {
		t.Fatal(err) // containerd keeps the profile it read at CreateContainer
	}
	startContainer(t, s, blocked)
	resp, err := execSync(t, s, blocked, 10, "hostname", "ANewHostName")
	if err != nil || resp.ExitCode != 1 || string(resp.Stderr) != "hostname: sethostname: Operation not permitted\n" {
		t.Errorf("hostname under a blocking profile: %v %d %q", err, resp.GetExitCode(), resp.GetStderr())
	}

	def, err := seccompContainer(t, s, pod, "default", &runtimeapi.SecurityProfile{})
	if err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, def)
	if resp, err := execSync(t, s, def, 10, "grep", "Seccomp:", "/proc/self/status"); err != nil || string(resp.Stdout) != "Seccomp:\t2\n" {
		t.Errorf("RuntimeDefault: %v %q", err, resp.GetStdout())
	}
}
