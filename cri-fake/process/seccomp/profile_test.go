package seccomp

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Load words its failures as containerd's contrib/seccomp.WithProfile does, and reads only a
// bounded regular file: a FIFO, a device or a huge file at the client's path fails at once.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", blockHostname)
	if p, err := Load(good); err != nil || p.DefaultAction != "SCMP_ACT_ALLOW" || len(p.Syscalls) != 1 {
		t.Fatalf("Load(good) = %+v, %v", p, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","listenerMetadata":"`+strings.Repeat("x", MaxProfileBytes)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing.json"), `cannot load seccomp profile "` + dir + `/missing.json": open ` + dir + `/missing.json: no such file or directory`},
		{dir, "cannot load seccomp profile \"" + dir + "\": read " + dir + ": not a regular file"},
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{big, "larger than 4194304 bytes"},
		{write("bad.json", "not json"), `decoding seccomp profile failed "` + dir + `/bad.json": invalid character 'o' in literal null (expecting 'u')`},
		{write("wrong.json", `{"syscalls": {}}`), "decoding seccomp profile failed"},
	}
	for _, tc := range tests {
		if p, err := Load(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %+v, %v; want an error with %q", tc.path, p, err, tc.want)
		}
	}
}
