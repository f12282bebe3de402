package seccomp

import (
	"encoding/binary"
	"syscall"
	"testing"
)

// simulatedCalls are the system calls package kernel asks a verdict on.
var simulatedCalls = []string{"openat", "utimensat", "mkdir", "unlink", "rmdir", "rename", "symlink", "chmod", "sethostname", "kill", "socket", "bind", "listen", "connect"}

// FuzzSeccompProfile feeds a Localhost profile (client-chosen JSON) through what CreateContainer
// and StartContainer do with it: Parse, Compile, and verdicts on every simulated call with
// arguments taken from the input. Nothing may panic; a compiled filter answers every call with
// a known action and an errno the kernel could return; a refusal is a *CompileError.
func FuzzSeccompProfile(f *testing.F) {
	for _, s := range []string{
		blockHostname, blockChmod, `{}`, `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":70000}`,
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["kill"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":9,"op":"SCMP_CMP_EQ"},{"index":1,"value":15,"op":"SCMP_CMP_EQ"}]}]}`,
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"SCMP_ACT_ERRNO","args":[{"index":9,"value":1,"op":"SCMP_CMP_EQ"}]}]}`,
		`{"defaultAction":"SCMP_ACT_TRAP","architectures":["SCMP_ARCH_X86_64"],"flags":["SECCOMP_FILTER_FLAG_LOG"]}`,
	} {
		f.Add([]byte(s), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	}
	f.Fuzz(func(t *testing.T, profile, argBytes []byte) {
		p, err := Parse(profile)
		if err != nil {
			return
		}
		filter, err := Compile(p)
		if err != nil {
			if _, ok := err.(*CompileError); !ok {
				t.Fatalf("Compile error %T %v is not a *CompileError", err, err)
			}
			return
		}
		if filter == nil {
			return
		}
		var args []Arg
		for i := 0; i+8 <= len(argBytes) && len(args) < maxArgs; i += 8 {
			args = append(args, Value(binary.LittleEndian.Uint64(argBytes[i:])))
		}
		if len(argBytes)%2 == 1 && len(args) > 0 {
			args[0] = Unknown
		}
		for _, call := range simulatedCalls {
			v := filter.Decide(call, args...)
			if v.Action > KillProcess || v.Errno > maxErrno || (v.Action == Trace && v.Errno != syscall.ENOSYS) {
				t.Fatalf("Decide(%s) = %+v", call, v)
			}
			if again := filter.Decide(call, args...); again != v {
				t.Fatalf("Decide(%s) is not deterministic: %+v then %+v", call, v, again)
			}
		}
	})
}
