package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFSView(t *testing.T) {
	host := t.TempDir()
	rw := filepath.Join(host, "rw")
	ro := filepath.Join(host, "ro")
	real := filepath.Join(host, "real")
	for _, d := range []string{rw, ro, real} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "data"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "marker"), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(host, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	mounts := []Mount{
		{ContainerPath: "/data/rw", HostPath: rw},
		{ContainerPath: "/data/ro", HostPath: ro, Readonly: true},
		{ContainerPath: "/data/linked", HostPath: link},
	}
	tests := []struct {
		name     string
		cfg      FSConfig
		script   string
		stdout   string
		stderr   string
		code     int
		hostFile string // a host file that must then hold hostData
		hostData string
	}{
		{name: "write through rw mount", script: "echo hi > /data/rw/f && cat /data/rw/f", stdout: "hi\n", hostFile: filepath.Join(rw, "f"), hostData: "hi\n"},
		{name: "read host file", script: "cat /data/ro/data", stdout: "from host\n"},
		{name: "ro mount refuses writes", script: "touch /data/ro/x", stderr: "touch: /data/ro/x: Read-only file system\n", code: 1},
		{name: "ro mount refuses redirect", script: "echo x > /data/ro/y", stderr: "sh: can't create /data/ro/y: Read-only file system\n", code: 1},
		{name: "symlinked host path resolves", script: "ls -A /data/linked", stdout: "marker\n"},
		{name: "mkdir in mount", script: "mkdir -p /data/rw/a/b && ls /data/rw/a", stdout: "b\n"},
		{name: "readonly rootfs", cfg: FSConfig{ReadonlyRootfs: true}, script: "touch test.go", stderr: "touch: test.go: Read-only file system\n", code: 1},
		{name: "readonly rootfs still writes mounts", cfg: FSConfig{ReadonlyRootfs: true}, script: "touch /data/rw/ok && echo ok", stdout: "ok\n"},
		{name: "writable rootfs", script: "touch test.go && [ -f test.go ] && echo 'Found'", stdout: "Found\n"},
		{name: "readonly path", cfg: FSConfig{ReadonlyPaths: []string{"/tmp"}}, script: "touch /tmp/test", stderr: "touch: /tmp/test: Read-only file system\n", code: 1},
		{name: "masked file reads empty", cfg: FSConfig{MaskedPaths: []string{"/etc/shells"}}, script: "cat /etc/shells; echo rc=$?", stdout: "rc=0\n"},
		{name: "masked dir is empty", cfg: FSConfig{MaskedPaths: []string{"/etc"}}, script: "ls /etc", stdout: ""},
		{name: "hostname file", cfg: FSConfig{Hostname: "pod-a"}, script: "cat /etc/hostname", stdout: "pod-a\n"},
		{name: "hosts lists pod IP", cfg: FSConfig{Hostname: "pod-a", IPs: []string{"10.1.2.3"}}, script: "grep pod-a /etc/hosts", stdout: "10.1.2.3\tpod-a\n"},
		{name: "resolv.conf", cfg: FSConfig{DNS: &DNSConfig{Servers: []string{"8.8.8.8"}, Searches: []string{"google.com"}, Options: []string{"timeout:1"}}}, script: "cat /etc/resolv.conf", stdout: "search google.com\nnameserver 8.8.8.8\noptions timeout:1\n"},
		{name: "passwd has image users", cfg: FSConfig{Users: []User{{Name: "web", UID: 1003, GID: 1003}}}, script: "grep ^web: /etc/passwd", stdout: "web:x:1003:1003:web:/home/web:/bin/sh\n"},
		{name: "group has image groups", cfg: FSConfig{Groups: []Group{{Name: "grp", GID: 50000, Members: []string{"web"}}}}, script: "grep ^grp: /etc/group", stdout: "grp:x:50000:web\n"},
		{name: "proc sys", cfg: FSConfig{Sysctls: map[string]string{"net.ipv4.ip_forward": "0"}}, script: "cat /proc/sys/net/ipv4/ip_forward", stdout: "0\n"},
		{name: "proc sys read-only", script: "echo 1 > /proc/sys/net/ipv4/ip_forward", stderr: "sh: can't create /proc/sys/net/ipv4/ip_forward: Read-only file system\n", code: 1},
		{name: "var/run symlink", script: "echo 5 > /var/run/x.pid && cat /run/x.pid", stdout: "5\n"},
		{name: "rm dir needs -r", script: "mkdir /tmp/d && rm /tmp/d", stderr: "rm: '/tmp/d' is a directory\n", code: 1},
		{name: "rm -rf", script: "mkdir -p /tmp/d/e && touch /tmp/d/e/f && rm -rf /tmp/d && ls /tmp", stdout: ""},
		{name: "cp and mv", script: "echo c > /tmp/a && cp /tmp/a /tmp/b && mv /tmp/b /tmp/c && cat /tmp/c && ls /tmp", stdout: "c\na\nc\n"},
		{name: "mv across mounts", script: "echo x > /tmp/m && mv /tmp/m /data/rw/m && cat /data/rw/m && ls /tmp", stdout: "x\n"},
		{name: "mkdir exists", script: "mkdir /etc", stderr: "mkdir: can't create directory '/etc': File exists\n", code: 1},
		{name: "dev null", script: "echo x > /dev/null && cat /dev/null", stdout: ""},
		{name: "head of dev zero", script: "head -c 3 /dev/zero | wc -c", stdout: "3\n"},
		{name: "cd and relative paths", script: "mkdir /w && cd /w && echo x > rel && cat /w/rel && pwd", stdout: "x\n/w\n"},
		{name: "mount point listed", script: "ls /data", stdout: "linked\nro\nrw\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Mounts = mounts
			fsys := newFS(t, cfg)
			out, errOut, code := sh(t, fsys, tc.script)
			if out != tc.stdout || errOut != tc.stderr || code != tc.code {
				t.Errorf("sh -c %q\n got stdout %q stderr %q code %d\nwant stdout %q stderr %q code %d", tc.script, out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
			if tc.hostFile != "" {
				data, err := os.ReadFile(tc.hostFile)
				if err != nil || string(data) != tc.hostData {
					t.Errorf("host file %s = %q, %v; want %q", tc.hostFile, data, err, tc.hostData)
				}
			}
		})
	}
}

func TestFSCopyOnWriteSharesImage(t *testing.T) {
	img := BaseLayer("busybox")
	a, b := newFS(t, FSConfig{Image: img}), newFS(t, FSConfig{Image: img})
	if err := a.WriteFile("/etc/shells", []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := b.ReadFile("/etc/shells")
	if err != nil || strings.Contains(string(got), "changed") {
		t.Fatalf("second container sees %q, %v: the image layer was mutated", got, err)
	}
	if a.WritableLayerBytes() != int64(len("changed\n")) {
		t.Errorf("writable layer = %d bytes, want %d", a.WritableLayerBytes(), len("changed\n"))
	}
}

func TestFSErrors(t *testing.T) {
	fsys := newFS(t, FSConfig{ReadonlyRootfs: true})
	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"read missing", func() error { _, err := fsys.ReadFile("/nope"); return err }, syscall.ENOENT},
		{"write ro rootfs", func() error { return fsys.WriteFile("/x", nil, 0o644) }, syscall.EROFS},
		{"mkdir ro rootfs", func() error { return fsys.Mkdir("/d", 0o755) }, syscall.EROFS},
		{"read dir", func() error { _, err := fsys.ReadFile("/etc"); return err }, syscall.EISDIR},
		{"readdir file", func() error { _, err := fsys.ReadDir("/etc/passwd"); return err }, syscall.ENOTDIR},
		{"through file", func() error { _, err := fsys.Stat("/etc/passwd/x"); return err }, syscall.ENOTDIR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFSMountErrors(t *testing.T) {
	if _, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "/x", HostPath: "/nonexistent/plugsim"}}}); err == nil {
		t.Error("a missing host path was accepted")
	}
	if _, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "rel", HostPath: t.TempDir()}}}); err == nil {
		t.Error("a relative container path was accepted")
	}
}

func TestLookup(t *testing.T) {
	fsys := newFS(t, FSConfig{MaskedPaths: []string{"/bin/ls"}})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sh"}, ""},
		{[]string{"/bin/echo"}, ""},
		{[]string{"nosuch"}, `exec: "nosuch": executable file not found in $PATH`},
		{[]string{"/bin/nosuch"}, `exec: "/bin/nosuch": stat /bin/nosuch: no such file or directory`},
		{[]string{"/bin/ls"}, `exec: "/bin/ls": permission denied`},
		{[]string{"/etc/passwd"}, `exec: "/etc/passwd": permission denied`},
	}
	for _, tc := range tests {
		err := Lookup(fsys, tc.args, nil, "/")
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Lookup(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestReadonlyMountNested: a non-recursive read-only bind leaves file systems
// mounted below it writable (kernel semantics critest's "non-recursive
// readonly mounts" checks); a recursive one does not. It uses the host's
// /dev with the tmpfs on /dev/shm below it, and writes only a temporary file
// in /dev/shm.
func TestReadonlyMountNested(t *testing.T) {
	if deviceOf("/dev") == 0 || deviceOf("/dev") == deviceOf("/dev/shm") {
		t.Skip("/dev/shm is not a separate mount below /dev here")
	}
	name := fmt.Sprintf("plugsim-process-test-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", name)) })
	tests := []struct {
		recursive bool
		script    string
		stderr    string
		code      int
	}{
		{false, "touch /hostdev/shm/" + name, "", 0},
		{false, "touch /hostdev/" + name, "touch: /hostdev/" + name + ": Read-only file system\n", 1},
		{true, "touch /hostdev/shm/" + name, "touch: /hostdev/shm/" + name + ": Read-only file system\n", 1},
	}
	for _, tc := range tests {
		fsys := newFS(t, FSConfig{Mounts: []Mount{{ContainerPath: "/hostdev", HostPath: "/dev", Readonly: true, RecursiveReadOnly: tc.recursive}}})
		_, errOut, code := sh(t, fsys, tc.script)
		if errOut != tc.stderr || code != tc.code {
			t.Errorf("recursive=%v %q: stderr %q code %d, want %q %d", tc.recursive, tc.script, errOut, code, tc.stderr, tc.code)
		}
		os.Remove(filepath.Join("/dev/shm", name))
	}
}
