package process

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// agnhostFS is a view of the agnhost image (base "agnhost").
func agnhostFS(tb testing.TB, cfg FSConfig) *FS {
	tb.Helper()
	cfg.Image = BaseLayer("agnhost")
	if cfg.Hostname == "" {
		cfg.Hostname = "agn-1"
	}
	return newFS(tb, cfg)
}

// TestAgnhostCommands checks the one-shot subcommands and agnhost's own command line against the
// output upstream's code produces (test/images/agnhost of k8s.io/kubernetes v1.37.2).
func TestAgnhostCommands(t *testing.T) {
	dns := &DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}}
	tests := []struct {
		name           string
		args           []string
		dns            *DNSConfig
		user           int
		code           int
		stdout, stderr string // regexps over the whole output
	}{
		// entrypoint-tester/ep.go:37: fmt.Printf("%v\n", os.Args).
		{name: "entrypoint-tester", args: []string{"/agnhost", "entrypoint-tester", "override", "arguments"},
			stdout: `^\[/agnhost entrypoint-tester override arguments\]\n$`},
		{name: "entrypoint-tester through /agnhost-2", args: []string{"/agnhost-2", "entrypoint-tester"},
			stdout: `^\[/agnhost-2 entrypoint-tester\]\n$`},
		// dns/common.go:62-70 and dns.go:33-52: the first search / nameserver line, comma-joined.
		{name: "dns-suffix", args: []string{"/agnhost", "dns-suffix"}, dns: dns,
			stdout: `^ns1\.svc\.cluster\.local,svc\.cluster\.local,cluster\.local\n$`},
		{name: "dns-server-list", args: []string{"/agnhost", "dns-server-list"}, dns: dns, stdout: `^10\.96\.0\.10\n$`},
		{name: "dns-suffix without a search line panics", args: []string{"/agnhost", "dns-suffix"}, dns: &DNSConfig{Servers: []string{"1.1.1.1"}},
			code: 2, stderr: `^panic: Could not find DNS search list!\n`},
		// dns/common.go:73: fmt.Println of /etc/hosts.
		{name: "etc-hosts", args: []string{"/agnhost", "etc-hosts"},
			stdout: `^127\.0\.0\.1\tlocalhost\n(?s:.*)10\.244\.0\.9\tagn-1\n\n$`},
		// logs-generator/logs_generator.go:76 (klog.Info to stderr), :64 (klog.Fatalf, exit 255).
		{name: "logs-generator", args: []string{"/agnhost", "logs-generator", "--log-lines-total", "3", "--run-duration", "30ms"},
			stderr: `^(I\d{4} \d\d:\d\d:\d\d\.\d{6} +1 logs_generator\.go:76\] \d (GET|POST|PUT) /api/v1/namespaces/(kube-system|default|ns)/pods/[bcdfghjklmnpqrstvwxz2456789]{3,4} [2-5]\d\d\n){3}$`},
		{name: "logs-generator short flags", args: []string{"/agnhost", "logs-generator", "-t", "1", "-d", "1ms"},
			stderr: `^I.* logs_generator\.go:76\] 0 `},
		{name: "logs-generator without lines", args: []string{"/agnhost", "logs-generator"}, code: 255,
			stderr: `^F\d{4} .* logs_generator\.go:64\] Invalid total number of lines: 0\n$`},
		// cobra's answers.
		{name: "unknown flag", args: []string{"/agnhost", "mounttest", "--nope"}, code: 1,
			stderr: `^Error: unknown flag: --nope\nUsage:\n  app mounttest \[flags\]\n`},
		{name: "positional argument", args: []string{"/agnhost", "pause", "extra"}, code: 1,
			stderr: `^Error: accepts at most 0 arg\(s\), received 1\n`},
		{name: "unknown command", args: []string{"/agnhost", "nope"}, code: 1,
			stderr: `^Error: unknown command "nope" for "app"\nRun 'app --help' for usage\.\n$`},
		{name: "not simulated", args: []string{"/agnhost", "port-forward-tester"}, code: 1, stderr: `not simulated`},
		{name: "version", args: []string{"/agnhost", "--version"}, stdout: `^app version 2\.66\.1\n$`},
		{name: "klog flags accepted", args: []string{"/agnhost", "entrypoint-tester", "--v=4"}, stdout: `^\[/agnhost entrypoint-tester --v=4\]\n$`},
		{name: "klog's v as a shorthand", args: []string{"/agnhost", "entrypoint-tester", "-v=4"}, stdout: `^\[/agnhost entrypoint-tester -v=4\]\n$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := agnhostFS(t, FSConfig{DNS: tc.dns, IPs: []string{"10.244.0.9"}})
			out, errOut, code := runCmd(t, Spec{Args: tc.args, FS: fsys, Hostname: "agn-1", Listen: (&loopbackListen{}).listen})
			if code != tc.code || !regexp.MustCompile(orEmpty(tc.stdout)).MatchString(out) || !regexp.MustCompile(orEmpty(tc.stderr)).MatchString(errOut) {
				t.Errorf("%q: code %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", tc.args, code, tc.code, out, tc.stdout, errOut, tc.stderr)
			}
		})
	}
}

func orEmpty(re string) string {
	if re == "" {
		return `^$`
	}
	return re
}

// TestAgnhostPause: pause/pause.go:44-70: "Paused", "Signals registered", and on TERM the
// message in the termination-message file and on stdout, exit 2 (INT: 1).
func TestAgnhostPause(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "terminated", 2}, {syscall.SIGINT, "interrupt", 1}} {
		var out syncBuffer
		fsys := agnhostFS(t, FSConfig{})
		p := startProc(t, Spec{Args: []string{"/agnhost", "pause"}, FS: fsys, Stdout: &out, Env: []string{"TERMINATION_MESSAGE_PATH=/tmp/msg"}})
		waitFor(t, "Signals registered", func() bool { return strings.Contains(out.String(), "Signals registered\n") })
		p.Signal(tc.sig)
		code := p.Wait()
		want := "Paused\nSignals registered\nexiting because of signal \"" + tc.name + "\"\n"
		msg, _ := fsys.ReadFile("/tmp/msg")
		if code != tc.code || out.String() != want || string(msg) != "exiting because of signal \""+tc.name+"\"\n" {
			t.Errorf("%v: code %d stdout %q message %q", tc.sig, code, out.String(), msg)
		}
	}
}

// hostDir makes a directory on the host for a mount, on tmpfs (/dev/shm) or the disk.
func hostDir(t *testing.T, tmpfs bool) string {
	t.Helper()
	if !tmpfs {
		return t.TempDir()
	}
	d, err := os.MkdirTemp("/dev/shm", "plugsim-mt-")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fsTypeName is what mounttest prints for the file system of host path p (mt_utils_linux.go).
func fsTypeName(t *testing.T, p string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		return "tmpfs"
	}
	return strconv.FormatInt(int64(st.Type), 10)
}

// TestMounttest runs agnhost mounttest as the emptyDir, ConfigMap and hostPath specs do
// (test/e2e/common/storage/empty_dir.go:400-600, configmap_volume.go) over host-backed mounts,
// with the lines of mounttest/mt.go and mt_utils.go.
func TestMounttest(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files are created and chowned on the host as the container's user")
	}
	memory := hostDir(t, true)
	disk := hostDir(t, false)
	setgid := hostDir(t, false)
	os.Chmod(memory, 0o777)
	os.Chmod(disk, 0o777)
	os.Chown(setgid, 0, 123)
	os.Chmod(setgid, 0o777|os.ModeSetgid|os.ModeSticky)
	// The kubelet's atomic writer: data-1 -> ..data/data-1, ..data -> ..2024_01_01_00_00_00.1.
	cm := hostDir(t, true)
	ts := filepath.Join(cm, "..2024_01_01_00_00_00.1")
	os.Mkdir(ts, 0o755)
	os.WriteFile(filepath.Join(ts, "data-1"), []byte("value-1"), 0o644)
	os.Symlink("..2024_01_01_00_00_00.1", filepath.Join(cm, "..data"))
	os.Symlink("..data/data-1", filepath.Join(cm, "data-1"))

	mounts := []Mount{
		{ContainerPath: "/test-volume", HostPath: memory},
		{ContainerPath: "/disk-volume", HostPath: disk},
		{ContainerPath: "/fsgroup-volume", HostPath: setgid},
		{ContainerPath: "/etc/configmap-volume", HostPath: cm, Readonly: true},
	}
	tests := []struct {
		name string
		args []string
		uid  int
		code int
		want string // regexp over stdout
	}{
		{"tmpfs 0644 as root", []string{"--fs_type=/test-volume", "--new_file_0644=/test-volume/test-file", "--file_perm=/test-volume/test-file"}, 0, 0,
			"^mount type of \"/test-volume\": tmpfs\ncontent of file \"/test-volume/test-file\": mount-tester new file\n\nperms of file \"/test-volume/test-file\": -rw-r--r--\n$"},
		{"tmpfs 0666 as 1001", []string{"--fs_type=/test-volume", "--new_file_0666=/test-volume/f0666", "--file_perm=/test-volume/f0666", "--file_owner=/test-volume/f0666"}, 1001, 0,
			"^mount type of \"/test-volume\": tmpfs\ncontent of file \"/test-volume/f0666\": mount-tester new file\n\nperms of file \"/test-volume/f0666\": -rw-rw-rw-\nowner UID of \"/test-volume/f0666\": 1001\nowner GID of \"/test-volume/f0666\": 0\n$"},
		{"disk 0777", []string{"--fs_type=/disk-volume", "--new_file_0777=/disk-volume/f0777", "--file_perm=/disk-volume/f0777"}, 0, 0,
			"^mount type of \"/disk-volume\": " + fsTypeName(t, disk) + "\ncontent of file \"/disk-volume/f0777\": mount-tester new file\n\nperms of file \"/disk-volume/f0777\": -rwxrwxrwx\n$"},
		{"volume mode", []string{"--fs_type=/test-volume", "--file_perm=/test-volume"}, 0, 0,
			"^mount type of \"/test-volume\": tmpfs\nperms of file \"/test-volume\": -rwxrwxrwx\n$"},
		// empty_dir.go:400-430: fsGroup's set-group-ID directory gives the new file its group.
		{"fsGroup setgid 0660", []string{"--new_file_0660=/fsgroup-volume/test-file", "--file_perm=/fsgroup-volume/test-file", "--file_owner=/fsgroup-volume/test-file"}, 1001, 0,
			"^content of file \"/fsgroup-volume/test-file\": mount-tester new file\n\nperms of file \"/fsgroup-volume/test-file\": -rw-rw----\nowner UID of \"/fsgroup-volume/test-file\": 1001\nowner GID of \"/fsgroup-volume/test-file\": 123\n$"},
		{"fsGroup directory mode", []string{"--file_mode=/fsgroup-volume", "--file_owner=/fsgroup-volume"}, 0, 0,
			"^mode of file \"/fsgroup-volume\": dgtrwxrwxrwx\nowner UID of \"/fsgroup-volume\": 0\nowner GID of \"/fsgroup-volume\": 123\n$"},
		// configmap_volume.go: the key's link and ..data are followed.
		{"configmap through ..data", []string{"--file_content=/etc/configmap-volume/data-1", "--file_mode=/etc/configmap-volume/data-1"}, 0, 0,
			"^mode of file \"/etc/configmap-volume/data-1\": -rw-r--r--\ncontent of file \"/etc/configmap-volume/data-1\": value-1\n$"},
		{"the container's own root is overlayfs", []string{"--fs_type=/"}, 0, 0, "^mount type of \"/\": 2035054128\n$"},
		{"missing file", []string{"--file_content=/test-volume/nothing"}, 0, 1,
			"^error reading file content for \"/test-volume/nothing\": open /test-volume/nothing: no such file or directory\n$"},
		{"read-only mount", []string{"--new_file_0644=/etc/configmap-volume/new"}, 0, 1,
			"^error writing new file \"/etc/configmap-volume/new\": open /etc/configmap-volume/new: read-only file system\n$"},
		{"loop ends on the expected content", []string{"--new_file_0644=/test-volume/loop", "--file_content_in_loop=/test-volume/loop", "--retry_time=30"}, 0, 0,
			"^content of file \"/test-volume/loop\": mount-tester new file\n\ncontent of file \"/test-volume/loop\": mount-tester new file\n\n$"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := agnhostFS(t, FSConfig{Mounts: mounts})
			out, errOut, code := runCmd(t, Spec{Args: append([]string{"/agnhost", "mounttest"}, tc.args...), FS: fsys, Identity: Identity{UID: tc.uid}})
			if code != tc.code || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Errorf("mounttest %q: code %d (want %d)\nstdout %q\nwant   %q\nstderr %q", tc.args, code, tc.code, out, tc.want, errOut)
			}
		})
	}
}

// TestMounttestSeesConfigMapUpdate: a running mounttest --file_content_in_loop sees the
// kubelet's atomic update of a ConfigMap volume (a new timestamped directory and ..data swapped
// to it), because every read goes to the host through the links (configmap_volume.go "updates
// should be reflected in volume").
func TestMounttestSeesConfigMapUpdate(t *testing.T) {
	cm := t.TempDir()
	ts1 := filepath.Join(cm, "..2024_01_01_00_00_00.1")
	os.Mkdir(ts1, 0o755)
	os.WriteFile(filepath.Join(ts1, "data-1"), []byte("value-1"), 0o644)
	os.Symlink("..2024_01_01_00_00_00.1", filepath.Join(cm, "..data"))
	os.Symlink("..data/data-1", filepath.Join(cm, "data-1"))
	fsys := agnhostFS(t, FSConfig{Mounts: []Mount{{ContainerPath: "/etc/configmap-volume", HostPath: cm, Readonly: true}}})
	var out syncBuffer
	p := startProc(t, Spec{Args: []string{"/agnhost", "mounttest", "--break_on_expected_content=false", "--retry_time=120",
		"--file_content_in_loop=/etc/configmap-volume/data-1"}, FS: fsys, Stdout: &out})
	waitFor(t, "the first value", func() bool {
		return strings.Contains(out.String(), `content of file "/etc/configmap-volume/data-1": value-1`)
	})
	// atomic_writer.go: write the new payload beside, point a new link at it, rename it over ..data.
	ts2 := filepath.Join(cm, "..2024_01_01_00_00_01.2")
	os.Mkdir(ts2, 0o755)
	os.WriteFile(filepath.Join(ts2, "data-1"), []byte("value-2"), 0o644)
	os.Symlink("..2024_01_01_00_00_01.2", filepath.Join(cm, "..data_tmp"))
	if err := os.Rename(filepath.Join(cm, "..data_tmp"), filepath.Join(cm, "..data")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(ts1)
	waitFor(t, "the updated value", func() bool {
		return strings.Contains(out.String(), `content of file "/etc/configmap-volume/data-1": value-2`)
	})
	p.Signal(syscall.SIGKILL)
	p.Wait()
	_ = time.Second
}
