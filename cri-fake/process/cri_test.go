package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCommand(t *testing.T) {
	tests := []struct {
		name                          string
		entrypoint, cmd, command, arg []string
		want                          string
	}{
		{"image cmd only", nil, []string{"sh"}, nil, nil, "sh"},
		{"entrypoint and cmd", []string{"/docker-entrypoint.sh"}, []string{"nginx", "-g", "daemon off;"}, nil, nil, "/docker-entrypoint.sh nginx -g daemon off;"},
		{"args replace cmd", []string{"/agnhost"}, []string{"pause"}, nil, []string{"netexec"}, "/agnhost netexec"},
		{"command replaces entrypoint and cmd", []string{"/e"}, []string{"c"}, []string{"echo"}, nil, "echo"},
		{"command and args", []string{"/e"}, []string{"c"}, []string{"sh", "-c"}, []string{"top"}, "sh -c top"},
	}
	for _, tc := range tests {
		if got := strings.Join(Command(tc.entrypoint, tc.cmd, tc.command, tc.arg), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if exe, ok := Executable(tc.entrypoint, tc.cmd, tc.command, tc.arg); !ok || exe != strings.Fields(tc.want)[0] {
			t.Errorf("%s: Executable %q, %v; want %q", tc.name, exe, ok, strings.Fields(tc.want)[0])
		}
	}
	for _, tc := range [][4][]string{{}, {nil, {}, {}, nil}} {
		if exe, ok := Executable(tc[0], tc[1], tc[2], tc[3]); ok || len(Command(tc[0], tc[1], tc[2], tc[3])) != 0 {
			t.Errorf("no command: Executable %q, %v; want none", exe, ok)
		}
	}
}

func i64(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }

func TestResolveIdentity(t *testing.T) {
	fsys := newFS(t, FSConfig{
		Users:  []User{{Name: "app", UID: 1000, GID: 1000}},
		Groups: []Group{{Name: "app", GID: 1000}, {Name: "extra", GID: 50000, Members: []string{"app"}}},
	})
	tests := []struct {
		name      string
		imageUser string
		sc        *runtimeapi.LinuxContainerSecurityContext
		want      string // "uid:gid:groups:username"
		err       string
	}{
		{"default root", "", nil, "0:0:[10]:root", ""},
		{"image uid", "1002", nil, "1002:0:[]:", ""},
		{"image name", "www-data", nil, "33:33:[]:www-data", ""},
		{"image uid:gid", "1003:1003", nil, "1003:1003:[]:", ""},
		{"image name:group", "www-data:www-data", nil, "33:33:[]:www-data", ""},
		{"image member groups", "app", nil, "1000:1000:[50000]:app", ""},
		{"run_as_user wins", "www-data", &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1001)}, "1001:0:[]:", ""},
		{"run_as_user and group", "", &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(1001), RunAsGroup: i64(1002)}, "1001:1002:[]:", ""},
		{"run_as_username", "", &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "app"}, "1000:1000:[50000]:app", ""},
		{"supplemental", "", &runtimeapi.LinuxContainerSecurityContext{SupplementalGroups: []int64{1234, 5678}}, "0:0:[10 1234 5678]:root", ""},
		{"strict policy", "app", &runtimeapi.LinuxContainerSecurityContext{SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict}, "1000:1000:[]:app", ""},
		{"group without user", "", &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(1002)}, "", "user group is specified without user"},
		{"unknown username", "", &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "ghost"}, "", "unable to find user ghost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ResolveIdentity(fsys, tc.imageUser, tc.sc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%d:%d:%v:%s", id.UID, id.GID, id.AdditionalGIDs, id.Username)
			if got != tc.want {
				t.Errorf("identity %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFromCRI(t *testing.T) {
	hostDir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(hostDir, link); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(hostDir, "seen"), []byte("x"), 0o644)
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "pod"},
		Hostname:  "pod-host",
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"}},
		Linux:     &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}},
	}
	cfg := &runtimeapi.ContainerConfig{
		Command: []string{"sh", "-c", "top"},
		Envs:    []*runtimeapi.KeyValue{{Key: "A", Value: []byte("from-config")}},
		Mounts:  []*runtimeapi.Mount{{ContainerPath: "/vol", HostPath: link, Readonly: true}},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			RunAsUser: i64(1001), RunAsGroup: i64(1002), SupplementalGroups: []int64{1234},
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}},
		}},
	}
	spec, err := FromCRI(cfg, sandbox, ImageConfig{Cmd: []string{"sh"}, Env: []string{"A=from-image", "B=image"}, Behavior: []byte(`{"memoryBytes": 1024}`)}, []string{"10.244.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, spec)
	checks := []struct{ cmd, want string }{
		{"echo $A $B", "from-config image\n"},
		{"echo $(id -u):$(id -g); id -G", "1001:1002\n1002 1234\n"},
		{"hostname; cat /etc/hostname", "pod-host\npod-host\n"},
		{"cat /etc/resolv.conf", "search default.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"cat /proc/sys/kernel/shm_rmid_forced", "1\n"},
		{"ls -A /vol", "seen\n"},
		{"touch /vol/x 2>&1", "touch: /vol/x: Read-only file system\n"},
		{"grep 10.244.0.5 /etc/hosts", "10.244.0.5\tpod-host\n"},
	}
	for _, c := range checks {
		out, _, _, err := p.ExecSync(t.Context(), []string{"sh", "-c", c.cmd}, 0)
		if err != nil || string(out) != c.want {
			t.Errorf("%q: %q (%v), want %q", c.cmd, out, err, c.want)
		}
	}
	if spec.Behaviour.MemoryBytes != 1024 {
		t.Errorf("behaviour %+v", spec.Behaviour)
	}

	// What containerd refuses at CreateContainer.
	bad := &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(1)}}}
	if _, err := FromCRI(bad, sandbox, ImageConfig{Cmd: []string{"sh"}}, nil); !errors.Is(err, ErrGroupWithoutUser) {
		t.Errorf("run_as_group without user: %v", err)
	}
	missing := &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/m", HostPath: "/nonexistent/plugsim"}}}
	if _, err := FromCRI(missing, sandbox, ImageConfig{Cmd: []string{"sh"}}, nil); err == nil {
		t.Error("a missing host path was accepted")
	}
}

func TestFromCRIImageBase(t *testing.T) {
	tests := []struct {
		img  ImageConfig
		want string // a path that must exist
	}{
		{ImageConfig{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}}, "/usr/sbin/nginx"},
		{ImageConfig{Cmd: []string{"httpd-foreground"}}, "/usr/local/apache2/htdocs/index.html"},
		{ImageConfig{Entrypoint: []string{"/agnhost"}}, "/agnhost"},
		{ImageConfig{Entrypoint: []string{"/pause"}}, "/pause"},
		{ImageConfig{Cmd: []string{"sh"}, Behavior: []byte(`{"base": "nginx", "files": {"/etc/motd": "hi"}}`)}, "/etc/motd"},
		{ImageConfig{Entrypoint: []string{"/cart"}}, "/cart"},
		{ImageConfig{Cmd: []string{"myapp", "--serve"}}, "/usr/local/bin/myapp"},
		{ImageConfig{Entrypoint: []string{"/srv"}, Behavior: []byte(`{"executables": {"/srv": "agnhost"}}`)}, "/srv"},
	}
	for _, tc := range tests {
		spec, err := FromCRI(&runtimeapi.ContainerConfig{}, &runtimeapi.PodSandboxConfig{}, tc.img, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tc.img, err)
		}
		if _, err := spec.FS.Stat(tc.want); err != nil {
			t.Errorf("%+v: %s missing: %v", tc.img, tc.want, err)
		}
	}
}

// TestImageProgram: an image's own unknown program runs until signalled and
// follows the catalog behaviour (the examples/cri catalog's batch job).
func TestImageProgram(t *testing.T) {
	img := ImageConfig{Cmd: []string{"/migrate", "--once"}, Behavior: []byte(`{"exitAfter": "30ms", "exitCode": 0}`)}
	spec, err := FromCRI(&runtimeapi.ContainerConfig{}, &runtimeapi.PodSandboxConfig{}, img, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, spec)
	if code := p.Wait(); code != 0 {
		t.Errorf("batch job exit code %d", code)
	}
	spec, err = FromCRI(&runtimeapi.ContainerConfig{}, &runtimeapi.PodSandboxConfig{}, ImageConfig{Entrypoint: []string{"/cart"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := startProc(t, spec)
	q.Signal(syscall.SIGTERM)
	if code := q.Wait(); code != 143 {
		t.Errorf("program after TERM: %d, want 143", code)
	}
	if _, err := ImageLayer(ImageConfig{Behavior: []byte(`{"executables": {"/x": "nosuchapplet"}}`)}); err == nil {
		t.Error("an unknown applet in executables was accepted")
	}
}
