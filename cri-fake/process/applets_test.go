package process

import (
	"regexp"
	"strings"
	"testing"
)

func TestApplets(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stdout string // exact, unless match is set
		match  string // regexp the stdout must match
		stderr string
		code   int
	}{
		{name: "echo", args: []string{"echo", "hello"}, stdout: "hello\n"},
		{name: "echo -n exact", args: []string{"echo", "-n", "hello"}, stdout: "hello"},
		{name: "echo -e", args: []string{"echo", "-e", `a\tb`}, stdout: "a\tb\n"},
		{name: "printf", args: []string{"printf", "%s=%d\\n", "a", "1", "b", "2"}, stdout: "a=1\nb=2\n"},
		{name: "printf width", args: []string{"printf", "[%5s][%-3d]", "x", "7"}, stdout: "[    x][7  ]"},
		{name: "cat file", args: []string{"cat", "/etc/hostname"}, stdout: "web-1\n"},
		{name: "cat missing", args: []string{"cat", "/nope"}, stderr: "cat: can't open '/nope': No such file or directory\n", code: 1},
		{name: "ls -A dir", args: []string{"ls", "-A", "/home"}, stdout: ""},
		{name: "ls root", args: []string{"ls", "/"}, match: `(?s)^bin\n.*etc\n.*tmp\n.*var\n$`},
		{name: "ls missing", args: []string{"ls", "/missing"}, stderr: "ls: /missing: No such file or directory\n", code: 1},
		{name: "ls -l", args: []string{"ls", "-ld", "/tmp"}, match: `^drwxrwxrwt +2 root +root +4096 .* /tmp\n$`},
		{name: "hostname", args: []string{"hostname"}, stdout: "web-1\n"},
		{name: "hostname set denied", args: []string{"hostname", "other"}, stderr: "hostname: sethostname: Operation not permitted\n", code: 1},
		{name: "id", args: []string{"id"}, stdout: "uid=0(root) gid=0(root) groups=0(root),10(wheel)\n"},
		{name: "id -u", args: []string{"id", "-u"}, stdout: "0\n"},
		{name: "whoami", args: []string{"whoami"}, stdout: "root\n"},
		{name: "env", args: []string{"env"}, match: `(?m)^GREETING=hi$`},
		{name: "env run", args: []string{"env", "X=1", "printenv", "X"}, stdout: "1\n"},
		{name: "printenv missing", args: []string{"printenv", "NOPE"}, code: 1},
		{name: "pwd", args: []string{"pwd"}, stdout: "/\n"},
		{name: "test -d", args: []string{"test", "-d", "/etc"}},
		{name: "test -f dir", args: []string{"test", "-f", "/etc"}, code: 1},
		{name: "[ -eq ]", args: []string{"[", "3", "-eq", "3", "]"}},
		{name: "[ missing ]", args: []string{"[", "a"}, stderr: "[: missing ]\n", code: 2},
		{name: "test -z", args: []string{"test", "-z", ""}},
		{name: "test -n", args: []string{"test", "-n", ""}, code: 1},
		{name: "test !=", args: []string{"test", "a", "!=", "b"}},
		{name: "test ! -e", args: []string{"test", "!", "-e", "/nope"}},
		{name: "test -a -o", args: []string{"test", "-d", "/etc", "-a", "-f", "/nope", "-o", "x"}},
		{name: "test parens", args: []string{"test", "(", "1", "-lt", "2", ")"}},
		{name: "test bad number", args: []string{"test", "x", "-eq", "1"}, stderr: "test: x: bad number\n", code: 2},
		{name: "test -w readonly proc", args: []string{"test", "-w", "/proc/sys/kernel/shm_rmid_forced"}, code: 1},
		{name: "true", args: []string{"true"}},
		{name: "false", args: []string{"false"}, code: 1},
		{name: "grep", args: []string{"grep", "nameserver", "/etc/resolv.conf"}, stdout: "nameserver 10.0.0.10\n"},
		{name: "grep -c", args: []string{"grep", "-c", "^nameserver", "/etc/resolv.conf"}, stdout: "1\n"},
		{name: "grep no match", args: []string{"grep", "nothing", "/etc/resolv.conf"}, code: 1},
		{name: "grep -q missing file", args: []string{"grep", "-q", "x", "/nope"}, stderr: "grep: /nope: No such file or directory\n", code: 2},
		{name: "wc -l", args: []string{"wc", "-l", "/etc/resolv.conf"}, stdout: "        3 /etc/resolv.conf\n"},
		{name: "head -n", args: []string{"head", "-n", "1", "/etc/resolv.conf"}, stdout: "search ns.svc.cluster.local\n"},
		{name: "tail -1", args: []string{"tail", "-1", "/etc/resolv.conf"}, stdout: "options ndots:5\n"},
		// A file that cannot be opened is reported and the others are still read (busybox).
		{name: "head missing then present", args: []string{"head", "-n", "1", "/nope", "/etc/resolv.conf"}, stdout: "\n==> /etc/resolv.conf <==\nsearch ns.svc.cluster.local\n", stderr: "head: can't open '/nope': No such file or directory\n", code: 1},
		{name: "tail missing then present", args: []string{"tail", "-1", "/nope", "/etc/resolv.conf"}, stdout: "options ndots:5\n", stderr: "tail: can't open '/nope': No such file or directory\n", code: 1},
		{name: "wc missing then present", args: []string{"wc", "-l", "/nope", "/etc/resolv.conf"}, stdout: "        3 /etc/resolv.conf\n        3 total\n", stderr: "wc: can't open '/nope': No such file or directory\n", code: 1},
		{name: "md5sum missing", args: []string{"md5sum", "/nope"}, stderr: "md5sum: can't open '/nope': No such file or directory\n", code: 1},
		{name: "sort missing then present", args: []string{"sort", "/nope", "/etc/hostname"}, stdout: "web-1\n", stderr: "sort: can't open '/nope': No such file or directory\n", code: 1},
		{name: "date format", args: []string{"date", "+%Y"}, match: `^20\d\d\n$`},
		{name: "sysctl", args: []string{"sysctl", "kernel.shm_rmid_forced"}, stdout: "kernel.shm_rmid_forced = 1\n"},
		{name: "sysctl -n", args: []string{"sysctl", "-n", "net.core.somaxconn"}, stdout: "4096\n"},
		{name: "sysctl write", args: []string{"sysctl", "-w", "kernel.x=1"}, stderr: "sysctl: error setting key 'kernel.x': Read-only file system\n", code: 1},
		{name: "cat proc sys", args: []string{"cat", "/proc/sys/fs/mqueue/msg_max"}, stdout: "100\n"},
		{name: "nproc", args: []string{"nproc"}, stdout: "2\n"},
		{name: "seq", args: []string{"seq", "3"}, stdout: "1\n2\n3\n"},
		{name: "basename", args: []string{"basename", "/a/b.txt", ".txt"}, stdout: "b\n"},
		{name: "dirname", args: []string{"dirname", "/a/b.txt"}, stdout: "/a\n"},
		{name: "which", args: []string{"which", "ls"}, stdout: "/bin/ls\n"},
		{name: "uname", args: []string{"uname"}, stdout: "Linux\n"},
		{name: "pgrep self excluded", args: []string{"pgrep", "pgrep"}, code: 1},
		{name: "pidof none", args: []string{"pidof", "nginx"}, code: 1},
		{name: "kill missing pid", args: []string{"kill", "999"}, stderr: "kill: can't kill pid 999: No such process\n", code: 1},
		{name: "no seccomp filter without a profile", args: []string{"grep", "Seccomp:", "/proc/self/status"}, stdout: "Seccomp:\t0\n"},
		{name: "default caps", args: []string{"grep", "CapBnd", "/proc/self/status"}, stdout: "CapBnd:\t00000000a80425fb\n"},
		{name: "cmdline", args: []string{"cat", "/proc/1/cmdline"}, stdout: "cat\x00/proc/1/cmdline\x00"},
		{name: "sleep bad", args: []string{"sleep", "x"}, stderr: "sleep: invalid number 'x'\n", code: 1},
		{name: "sleep short", args: []string{"sleep", "0.01"}},
		{name: "busybox multi-call", args: []string{"busybox", "echo", "via busybox"}, stdout: "via busybox\n"},
		{name: "mount denied", args: []string{"mount", "--bind", "/etc", "/mnt"}, stderr: "mount: permission denied (are you root?)\n", code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := newFS(t, FSConfig{
				Hostname: "web-1",
				DNS:      &DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}},
				Sysctls:  map[string]string{"kernel.shm_rmid_forced": "1", "fs.mqueue.msg_max": "100"},
			})
			out, errOut, code := runCmd(t, Spec{Args: tc.args, FS: fsys, Hostname: "web-1", Env: []string{"GREETING=hi"}, Identity: Identity{AdditionalGIDs: []int{10}}})
			if tc.match != "" {
				if !regexp.MustCompile(tc.match).MatchString(out) {
					t.Errorf("%q stdout %q does not match %q", tc.args, out, tc.match)
				}
			} else if out != tc.stdout {
				t.Errorf("%q stdout = %q, want %q", tc.args, out, tc.stdout)
			}
			if errOut != tc.stderr || code != tc.code {
				t.Errorf("%q stderr %q code %d, want stderr %q code %d", tc.args, errOut, code, tc.stderr, tc.code)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	users := []User{{Name: "www-data", UID: 33, GID: 33}, {Name: "app", UID: 1002, GID: 1002}}
	groups := []Group{{Name: "app", GID: 1002}}
	tests := []struct {
		name string
		id   Identity
		args []string
		want string
		code int
	}{
		{"uid and gid", Identity{UID: 1001, GID: 1002}, []string{"sh", "-c", "echo $(id -u):$(id -g)"}, "1001:1002\n", 0},
		{"supplemental groups", Identity{UID: 0, GID: 0, AdditionalGIDs: []int{1234, 5678}}, []string{"id", "-G"}, "0 1234 5678\n", 0},
		{"name from passwd", Identity{UID: 33, GID: 33}, []string{"id", "-nu"}, "www-data\n", 0},
		{"explicit username", Identity{UID: 1002, GID: 1002, Username: "app"}, []string{"whoami"}, "app\n", 0},
		{"unknown uid name", Identity{UID: 4242, GID: 4242}, []string{"id", "-nu"}, "", 1},
		{"full id", Identity{UID: 1002, GID: 1002}, []string{"id"}, "uid=1002(app) gid=1002(app) groups=1002(app)\n", 0},
		{"non-root cannot write /", Identity{UID: 1002, GID: 1002}, []string{"sh", "-c", "touch /x 2>&1"}, "touch: /x: Permission denied\n", 1},
		{"non-root writes /tmp", Identity{UID: 1002, GID: 1002}, []string{"sh", "-c", "touch /tmp/x && ls -l /tmp/x | grep -c app"}, "1\n", 0},
		{"no effective caps for non-root", Identity{UID: 1002, GID: 1002}, []string{"grep", "CapEff", "/proc/self/status"}, "CapEff:\t0000000000000000\n", 0},
		{"dropped all caps", Identity{Capabilities: EffectiveCapabilities(nil, []string{"ALL"}, false)}, []string{"grep", "CapBnd", "/proc/self/status"}, "CapBnd:\t0000000000000000\n", 0},
		{"privileged", Identity{Privileged: true}, []string{"grep", "CapBnd", "/proc/self/status"}, "CapBnd:\t000001ffffffffff\n", 0},
		{"privileged hostname", Identity{Privileged: true}, []string{"sh", "-c", "hostname renamed && hostname"}, "renamed\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := newFS(t, FSConfig{Users: users, Groups: groups})
			out, _, code := runCmd(t, Spec{Args: tc.args, FS: fsys, Identity: tc.id})
			if out != tc.want || code != tc.code {
				t.Errorf("%q as %+v: stdout %q code %d, want %q code %d", tc.args, tc.id, out, code, tc.want, tc.code)
			}
		})
	}
}

func TestEffectiveCapabilities(t *testing.T) {
	tests := []struct {
		name       string
		add, drop  []string
		privileged bool
		has, lacks []string
	}{
		{"default", nil, nil, false, []string{"CAP_CHOWN", "CAP_NET_RAW"}, []string{"CAP_NET_ADMIN", "CAP_SYS_ADMIN"}},
		{"add", []string{"NET_ADMIN"}, nil, false, []string{"CAP_NET_ADMIN", "CAP_CHOWN"}, []string{"CAP_SYS_ADMIN"}},
		{"drop", nil, []string{"NET_RAW"}, false, []string{"CAP_CHOWN"}, []string{"CAP_NET_RAW"}},
		{"add all", []string{"ALL"}, nil, false, []string{"CAP_SYS_ADMIN", "CAP_BPF"}, nil},
		{"drop all add one", []string{"CAP_KILL"}, []string{"ALL"}, false, []string{"CAP_KILL"}, []string{"CAP_CHOWN"}},
		{"privileged", nil, []string{"ALL"}, true, []string{"CAP_SYS_ADMIN"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(EffectiveCapabilities(tc.add, tc.drop, tc.privileged), ",")
			for _, c := range tc.has {
				if !strings.Contains(got, c) {
					t.Errorf("missing %s in %s", c, got)
				}
			}
			for _, c := range tc.lacks {
				if strings.Contains(got, c) {
					t.Errorf("unexpected %s in %s", c, got)
				}
			}
		})
	}
}
