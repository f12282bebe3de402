package seccomp

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func mustParse(t *testing.T, profile string) *Filter {
	t.Helper()
	p, err := Parse([]byte(profile))
	if err != nil {
		t.Fatalf("Parse(%s): %v", profile, err)
	}
	f, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile(%s): %v", profile, err)
	}
	return f
}

// critest's two profiles (cri-tools pkg/validate/security_context_linux.go).
const (
	blockHostname = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]}`
	blockChmod    = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["chmod", "fchmodat"], "action": "SCMP_ACT_ERRNO"}]}`
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name, profile, call string
		args                []Arg
		want                Action
		errno               syscall.Errno
	}{
		{name: "blocked sethostname", profile: blockHostname, call: "sethostname", want: Errno, errno: syscall.EPERM},
		{name: "other call allowed", profile: blockHostname, call: "chmod", want: Allow},
		{name: "chmod blocked", profile: blockChmod, call: "chmod", want: Errno, errno: syscall.EPERM},
		{name: "allow-list default errno", profile: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ALLOW"}]}`, call: "mkdir", want: Errno, errno: syscall.EPERM},
		{name: "allow-list allows", profile: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ALLOW"}]}`, call: "chmod", want: Allow},
		{name: "errnoRet", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","errnoRet":38}]}`, call: "kill", want: Errno, errno: syscall.ENOSYS},
		{name: "defaultErrnoRet", profile: `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":13}`, call: "kill", want: Errno, errno: syscall.EACCES},
		{name: "errno capped at MAX_ERRNO", profile: `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":5000}`, call: "kill", want: Errno, errno: 4095},
		{name: "errno keeps 16 bits", profile: `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":65537}`, call: "kill", want: Errno, errno: 1},
		{name: "errno 0 skips", profile: `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":0}`, call: "kill", want: Errno, errno: 0},
		{name: "trace without tracer", profile: `{"defaultAction":"SCMP_ACT_TRACE"}`, call: "kill", want: Trace, errno: syscall.ENOSYS},
		{name: "kill is kill thread", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_KILL"}]}`, call: "kill", want: KillThread},
		{name: "arg condition holds", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":256,"op":"SCMP_CMP_EQ"}]}]}`,
			call: "chmod", args: []Arg{Unknown, Value(0o400)}, want: Errno, errno: syscall.EPERM},
		{name: "arg condition fails", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":256,"op":"SCMP_CMP_EQ"}]}]}`,
			call: "chmod", args: []Arg{Unknown, Value(0o644)}, want: Allow},
		{name: "condition on an unknown argument never holds", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":0,"op":"SCMP_CMP_NE"}]}]}`,
			call: "chmod", args: []Arg{Unknown, Value(0o644)}, want: Allow},
		{name: "conditions AND", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQ"},{"index":1,"value":9,"op":"SCMP_CMP_EQ"}]}]}`,
			call: "kill", args: []Arg{Value(1), Value(15)}, want: Allow},
		{name: "repeated index ORs", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":9,"op":"SCMP_CMP_EQ"},{"index":1,"value":15,"op":"SCMP_CMP_EQ"}]}]}`,
			call: "kill", args: []Arg{Value(1), Value(15)}, want: Errno, errno: syscall.EPERM},
		{name: "masked equal", profile: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":2048,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}]}`,
			call: "chmod", args: []Arg{Unknown, Value(0o755)}, want: Allow},
		{name: "masked equal refuses setuid", profile: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":2048,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}]}`,
			call: "chmod", args: []Arg{Unknown, Value(0o4755)}, want: Errno, errno: syscall.EPERM},
		{name: "most restrictive match wins", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_LOG"},{"names":["kill"],"action":"SCMP_ACT_KILL_PROCESS"},{"names":["kill"],"action":"SCMP_ACT_ERRNO"}]}`,
			call: "kill", want: KillProcess},
		{name: "rule repeating the default is dropped", profile: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO"},{"names":["kill"],"action":"SCMP_ACT_ALLOW"}]}`,
			call: "kill", want: Allow},
		{name: "unknown syscall name ignored", profile: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["no_such_call"],"action":"SCMP_ACT_ERRNO"}]}`, call: "kill", want: Allow},
		{name: "docker-format fields ignored", profile: `{"defaultAction":"SCMP_ACT_ALLOW","archMap":[{"architecture":"SCMP_ARCH_X86_64"}],"syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","includes":{"caps":["CAP_X"]},"comment":"x"}]}`,
			call: "chmod", want: Errno, errno: syscall.EPERM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := mustParse(t, tc.profile).Decide(tc.call, tc.args...)
			if v.Action != tc.want || v.Errno != tc.errno {
				t.Errorf("Decide(%s) = action %d errno %d, want action %d errno %d", tc.call, v.Action, v.Errno, tc.want, tc.errno)
			}
		})
	}
}

func TestNoFilter(t *testing.T) {
	for _, profile := range []string{`{}`, `{"architectures":["SCMP_ARCH_X86_64"]}`} {
		p, err := Parse([]byte(profile))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := Compile(p); f != nil || err != nil {
			t.Errorf("Compile(%s) = %v, %v; want no filter (runc installs none)", profile, f, err)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct{ profile, want string }{
		{`{"defaultAction":"SCMP_ACT_NOPE"}`, "string SCMP_ACT_NOPE is not a valid action for seccomp"},
		{`{"syscalls":[{"names":["kill"],"action":"SCMP_ACT_ALLOW"}]}`, "string  is not a valid action for seccomp"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"BLOCK"}]}`, "string BLOCK is not a valid action for seccomp"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_Z80"]}`, "string SCMP_ARCH_Z80 is not a valid arch for seccomp"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","flags":["SECCOMP_FILTER_FLAG_NOPE"]}`, "seccomp flag SECCOMP_FILTER_FLAG_NOPE is not known to runc"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":1,"op":"SCMP_CMP_SOME"}]}]}`, "string SCMP_CMP_SOME is not a valid operator for seccomp"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}`, "error creating seccomp syscall condition for syscall kill: syscalls only have up to 6 arguments (6 given)"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":[""],"action":"SCMP_ACT_ERRNO"}]}`, "empty string is not a valid syscall"},
		{`{"defaultAction":"SCMP_ACT_NOTIFY"}`, "SCMP_ACT_NOTIFY cannot be used as default action"},
		{`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_NOTIFY"}]}`, "SCMP_ACT_NOTIFY is not simulated"},
	}
	for _, tc := range tests {
		p, err := Parse([]byte(tc.profile))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.profile, err)
		}
		f, err := Compile(p)
		var ce *CompileError
		if f != nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v, %v; want a *CompileError with %q", tc.profile, f, err, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, profile := range []string{``, `[]`, `{"defaultAction": 1}`, `{"syscalls": [{"names": "chmod"}]}`, `{"defaultErrnoRet": -1}`, `{`} {
		if p, err := Parse([]byte(profile)); err == nil {
			t.Errorf("Parse(%q) = %+v; want an error (containerd's json.Unmarshal refuses it)", profile, p)
		}
	}
}

// The runtime default allows what a container's programs need and refuses sethostname
// unless CAP_SYS_ADMIN is in the bounding set, as containerd's does.
func TestRuntimeDefault(t *testing.T) {
	for _, call := range []string{"openat", "chmod", "mkdir", "unlink", "rmdir", "rename", "symlink", "utimensat", "kill", "bind", "listen", "connect"} {
		if v := RuntimeDefault(false).Decide(call, Unknown, Unknown, Unknown, Unknown); v.Action != Allow {
			t.Errorf("RuntimeDefault refuses %s: %+v", call, v)
		}
	}
	if v := RuntimeDefault(false).Decide("sethostname"); v.Action != Errno || v.Errno != syscall.EPERM {
		t.Errorf("RuntimeDefault without CAP_SYS_ADMIN: sethostname %+v, want EPERM", v)
	}
	if v := RuntimeDefault(true).Decide("sethostname"); v.Action != Allow {
		t.Errorf("RuntimeDefault with CAP_SYS_ADMIN: sethostname %+v, want allowed", v)
	}
	inet := []Arg{Value(syscall.AF_INET), Value(syscall.SOCK_STREAM), Value(0)}
	if v := RuntimeDefault(false).Decide("socket", inet...); v.Action != Allow {
		t.Errorf("RuntimeDefault refuses an AF_INET socket: %+v", v)
	}
	if v := RuntimeDefault(false).Decide("socket", Value(syscall.AF_ALG), Value(syscall.SOCK_SEQPACKET), Value(0)); v.Action != Errno {
		t.Errorf("RuntimeDefault allows an AF_ALG socket: %+v", v)
	}
	if v := RuntimeDefault(false).Decide("clone", Value(syscall.CLONE_NEWNS)); v.Action != Errno {
		t.Errorf("RuntimeDefault allows clone(CLONE_NEWNS) without CAP_SYS_ADMIN: %+v", v)
	}
	if v := RuntimeDefault(false).Decide("clone3"); v.Errno != syscall.ENOSYS {
		t.Errorf("RuntimeDefault clone3 without CAP_SYS_ADMIN: %+v, want ENOSYS", v)
	}
}
