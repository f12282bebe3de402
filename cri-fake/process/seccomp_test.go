package process

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// seccompSpec is FromCRI's spec for a busybox container running script with security context sc.
func seccompSpec(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext, script string) (Spec, error) {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Command:  []string{"sh", "-c", script},
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: sc},
	}
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod"}, Hostname: "pod"}
	return FromCRI(cfg, sandbox, ImageConfig{Cmd: []string{"sh"}}, nil)
}

func writeProfile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	allowAll      = `{"defaultAction": "SCMP_ACT_ALLOW"}`
	blockHostname = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]}`
	blockChmod    = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["chmod", "fchmodat"], "action": "SCMP_ACT_ERRNO"}]}`
)

func localhost(path string) *runtimeapi.SecurityProfile {
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}
}

// The profile decides, with the capability present: one allowing sethostname lets `hostname x`
// succeed, one blocking it fails it with EPERM as busybox prints it, whatever the capability.
func TestSeccompProfiles(t *testing.T) {
	sysAdmin := &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}
	tests := []struct {
		name           string
		sc             *runtimeapi.LinuxContainerSecurityContext
		script         string
		stdout, stderr string
		code           int
	}{
		{name: "localhost allowing sethostname", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, Seccomp: localhost(writeProfile(t, allowAll))},
			script: "hostname x && hostname; grep Seccomp /proc/self/status", stdout: "x\nSeccomp:\t2\nSeccomp_filters:\t1\n"},
		{name: "localhost blocking sethostname", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, Seccomp: localhost(writeProfile(t, blockHostname))},
			script: "hostname x", stderr: "hostname: sethostname: Operation not permitted\n", code: 1},
		{name: "localhost/ prefix trimmed", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, Seccomp: localhost("localhost/" + writeProfile(t, blockHostname))},
			script: "hostname x", stderr: "hostname: sethostname: Operation not permitted\n", code: 1},
		{name: "deprecated profile path", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, SeccompProfilePath: "localhost/" + writeProfile(t, blockHostname)},
			script: "hostname x", stderr: "hostname: sethostname: Operation not permitted\n", code: 1},
		{name: "privileged ignores the profile", sc: &runtimeapi.LinuxContainerSecurityContext{Privileged: true, Seccomp: localhost(writeProfile(t, blockHostname))},
			script: "hostname x && hostname; grep Seccomp: /proc/self/status", stdout: "x\nSeccomp:\t0\n"},
		{name: "unconfined", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
			script: "hostname x && hostname; grep Seccomp: /proc/self/status", stdout: "x\nSeccomp:\t0\n"},
		{name: "runtime default", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{}},
			script: "grep Seccomp: /proc/self/status; mkdir /d && chmod 700 /d && echo ok", stdout: "Seccomp:\t2\nok\n"},
		{name: "runtime default with SYS_ADMIN allows sethostname", sc: &runtimeapi.LinuxContainerSecurityContext{Capabilities: sysAdmin, Seccomp: &runtimeapi.SecurityProfile{}},
			script: "hostname x && hostname", stdout: "x\n"},
		{name: "deprecated runtime/default", sc: &runtimeapi.LinuxContainerSecurityContext{SeccompProfilePath: "runtime/default"},
			script: "grep Seccomp: /proc/self/status", stdout: "Seccomp:\t2\n"},
		{name: "chmod blocked", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t, blockChmod))},
			script: "chmod 400 /", stderr: "chmod: /: Operation not permitted\n", code: 1},
		{name: "chmod blocked by mode only", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t,
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","errnoRet":13,"args":[{"index":1,"value":2048,"valueTwo":2048,"op":"SCMP_CMP_MASKED_EQ"}]}]}`))},
			script: "touch /f; chmod 755 /f && chmod 4755 /f", stderr: "chmod: /f: Permission denied\n", code: 1},
		{name: "kill blocked", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t,
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO"}]}`))},
			script: "sleep 10 & kill $!", stderr: "kill: can't kill pid", code: 1},
		{name: "mkdir and writes blocked", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t,
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","openat"],"action":"SCMP_ACT_ERRNO","errnoRet":30}]}`))},
			script: "mkdir /d; echo x > /f", stderr: "mkdir: can't create directory '/d': Read-only file system\nsh: can't create /f: Read-only file system\n", code: 1},
		{name: "kill action ends the process with SIGSYS", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t,
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_KILL_PROCESS"}]}`))},
			// Killed in the call: it prints nothing after it.
			script: "mkdir /d", code: 159},
		{name: "errno 0 skips the call", sc: &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t,
			`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":0}]}`))},
			script: "mkdir /d && echo made; ls -d /d", stdout: "made\n", stderr: "ls: /d: No such file or directory\n", code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := seccompSpec(t, tc.sc, tc.script)
			if err != nil {
				t.Fatalf("FromCRI: %v", err)
			}
			out, errOut, code := runCmd(t, spec)
			if out != tc.stdout || !strings.HasPrefix(errOut, tc.stderr) || (tc.stderr == "" && errOut != "") || code != tc.code {
				t.Errorf("%q: stdout %q stderr %q code %d; want %q, %q, %d", tc.script, out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

// A profile that cannot be read or parsed fails CreateContainer (FromCRI) with containerd's
// words; one that parses but that runc refuses is Spec.Refused, and Start fails with it.
func TestSeccompProfileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	tests := []struct {
		name string
		sc   *runtimeapi.LinuxContainerSecurityContext
		want string
	}{
		{"missing", &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(missing)},
			`cannot load seccomp profile "` + missing + `": open ` + missing + `: no such file or directory`},
		{"not json", &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t, "{"))}, "decoding seccomp profile failed"},
		{"ref without localhost", &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault, LocalhostRef: "/x"}},
			"failed to generate seccomp spec opts: seccomp config invalid LocalhostRef must only be set if ProfileType is Localhost"},
		{"unknown type", &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: 7}}, "seccomp unknown ProfileType"},
		{"bad deprecated path", &runtimeapi.LinuxContainerSecurityContext{SeccompProfilePath: "/abs/path.json"}, `failed to generate seccomp spec opts: invalid profile "/abs/path.json"`},
	}
	for _, tc := range tests {
		if !SeccompReadsFile(tc.sc) {
			t.Errorf("%s: SeccompReadsFile false; the runtime would not choose the profile at CreateContainer", tc.name)
		}
		if _, err := seccompSpec(t, tc.sc, "true"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: FromCRI error %v; want %q", tc.name, err, tc.want)
		}
	}
	spec, err := seccompSpec(t, &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(writeProfile(t, `{"defaultAction":"SCMP_ACT_BLOCK"}`))}, "true")
	var refusal *SeccompRefusal
	if err != nil || !errors.As(spec.Refused, &refusal) {
		t.Fatalf("FromCRI = Refused %v, %v; want a refusal for StartContainer", spec.Refused, err)
	}
	if _, err := Start(t.Context(), spec); err == nil || err.Error() != "string SCMP_ACT_BLOCK is not a valid action for seccomp" {
		t.Errorf("Start with a refused profile: %v", err)
	}
	for _, sc := range []*runtimeapi.LinuxContainerSecurityContext{nil, {}, {Seccomp: &runtimeapi.SecurityProfile{}}, {SeccompProfilePath: "unconfined"}} {
		if SeccompReadsFile(sc) {
			t.Errorf("SeccompReadsFile(%v) true; nothing to read", sc)
		}
	}
}
