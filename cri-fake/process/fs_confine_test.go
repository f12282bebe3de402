package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// deviceOf is the device number of the file system holding p (0 if unknown).
func deviceOf(p string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0
	}
	return uint64(st.Dev)
}

// victims plants files and directories outside every mount (beside the mount
// sources in one t.TempDir()) and says, at the end of the test, whether
// anything under it changed: content, mode, a symlink's target, an entry
// added or removed.
type victims struct {
	dir  string
	want map[string]string
}

func plantVictims(tb testing.TB, dir string) *victims {
	tb.Helper()
	v := &victims{dir: dir}
	for _, d := range []string{"vdir", "dir"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for name, data := range map[string]string{"secret.txt": "the secret\n", "vdir/keep": "keep me\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	v.want = v.snapshot(tb)
	tb.Cleanup(func() {
		got := v.snapshot(tb)
		for p, w := range v.want {
			if got[p] != w {
				tb.Errorf("victim %s changed: %q, was %q", p, got[p], w)
			}
		}
		for p, g := range got {
			if _, ok := v.want[p]; !ok {
				tb.Errorf("victim directory gained %s (%q)", p, g)
			}
		}
	})
	return v
}

func (v *victims) snapshot(tb testing.TB) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(v.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := st.Mode().String()
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			desc += " -> " + t
		case st.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			desc += " " + string(data)
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		tb.Fatalf("snapshot of victims: %v", err)
	}
	return out
}

// TestFSConfinedToMount runs, in a container with the host mount
// <tmp>/x:/data (writable), the hostile commands of issue 12 and their
// neighbours. Each must be refused or stay inside the container's view; the
// victims beside x are checked untouched when the test ends.
func TestFSConfinedToMount(t *testing.T) {
	tests := []struct {
		name   string
		script string // $V is the victims' host directory, $X the mount's
		stdout string
		stderr string
		code   int
		// host is a file below $X that must then hold hostData ("" to skip).
		host, hostData string
	}{
		{name: "issue 12 reproduction",
			script: `ln -s $V/secret.txt /data/link; cat /data/link; echo PWNED > /data/link; ln -s ../../victims /data/up; echo new > /data/up/created.txt; rm -rf /data/up/vdir`,
			stderr: "cat: can't open '/data/link': No such file or directory\n" +
				"sh: can't create /data/link: No such file or directory\n" +
				"sh: can't create /data/up/created.txt: No such file or directory\n",
			code: 0, host: "link", hostData: "-> $V/secret.txt"},
		{name: "absolute target is the container's root",
			script: `ln -s /etc/hostname /data/h; cat /data/h`, stdout: "testhost\n"},
		{name: "absolute target into the mount itself",
			script: `echo in > /data/f; ln -s /data/f /data/abs; cat /data/abs; echo more >> /data/abs`, stdout: "in\n", host: "f", hostData: "in\nmore\n"},
		{name: "absolute target names the host path of the mount",
			script: `echo in > /data/f; ln -s $X/f /data/hostpath; cat /data/hostpath`,
			stderr: "cat: can't open '/data/hostpath': No such file or directory\n", code: 1},
		{name: "relative .. chain stops at the container's root",
			script: `ln -s ../../../../../../../../.. /data/root; ls /data/root/ | grep -x bin; cat /data/root/$V/secret.txt`,
			stdout: "bin\n", stderr: "cat: can't open '/data/root/$V/secret.txt': No such file or directory\n", code: 1},
		// (The applets clean ".." in their own arguments lexically; in a
		// symlink's target it is the kernel's physical "..".)
		{name: "dot-dot after a symlink is the target's parent",
			script: `mkdir -p /data/a/b; echo top > /data/a/t; ln -s a/b /data/ab; ln -s ab/../t /data/via; cat /data/via`, stdout: "top\n"},
		{name: "dot-dot from the mount leaves it",
			script: `cat /data/../etc/hostname`, stdout: "testhost\n"},
		{name: "symlink to a directory: create through it",
			script: `ln -s $V /data/vd; touch /data/vd/new; mkdir /data/vd/newdir; echo x > /data/vd/dir/f`,
			stderr: "touch: /data/vd/new: No such file or directory\n" +
				"mkdir: can't create directory '/data/vd/newdir': No such file or directory\n" +
				"sh: can't create /data/vd/dir/f: No such file or directory\n", code: 1},
		{name: "symlink to a directory: remove through it",
			script: `ln -s $V /data/vd; rm -rf /data/vd/vdir; rm /data/vd/secret.txt; rmdir /data/vd/dir`,
			stderr: "rm: can't remove '/data/vd/secret.txt': No such file or directory\n" +
				"rmdir: '/data/vd/dir': No such file or directory\n", code: 1},
		{name: "relative symlink to a directory outside",
			script: `mkdir /data/d; ln -s ../../../victims /data/d/rv; cat /data/d/rv/secret.txt`,
			stderr: "cat: can't open '/data/d/rv/secret.txt': No such file or directory\n", code: 1},
		{name: "removing the link removes only the link",
			script: `ln -s $V /data/vd; rm -rf /data/vd; ls -A /data`, stdout: ""},
		{name: "a link inside the mount works",
			script: `mkdir /data/real; echo r > /data/real/f; ln -s real /data/rl; cat /data/rl/f; echo w > /data/rl/g; ls /data/real`,
			stdout: "r\nf\ng\n", host: "real/g", hostData: "w\n"},
		{name: "symlink loop",
			script: `ln -s loop2 /data/loop1; ln -s loop1 /data/loop2; cat /data/loop1; echo x > /data/loop2`,
			stderr: "cat: can't open '/data/loop1': Symbolic link loop\nsh: can't create /data/loop2: Symbolic link loop\n", code: 1},
		{name: "self loop",
			script: `ln -s self /data/self; cat /data/self/x`,
			stderr: "cat: can't open '/data/self/x': Symbolic link loop\n", code: 1},
		{name: "rename out of the mount goes to the container's view",
			script: `echo f > /data/f; mv /data/f /tmp/f; cat /tmp/f; ls -A /data`, stdout: "f\n"},
		{name: "rename through a link to outside",
			script: `echo f > /data/f; ln -s $V /data/vd; mv /data/f /data/vd/stolen; mv /data/vd/secret.txt /data/got`,
			stderr: "mv: can't rename '/data/f': No such file or directory\nmv: can't rename '/data/vd/secret.txt': No such file or directory\n", code: 1},
		{name: "rename a link keeps it a link",
			script: `ln -s $V/secret.txt /data/l1; mv /data/l1 /data/l2; readlink /data/l2; cat /data/l2`,
			stdout: "$V/secret.txt\n", stderr: "cat: can't open '/data/l2': No such file or directory\n", code: 1},
		{name: "hard link of a link to outside",
			script: `ln -s $V/secret.txt /data/l; ln /data/l /data/hard; ln $V/secret.txt /data/hard2`,
			stderr: "ln: /data/hard: No such file or directory\nln: /data/hard2: No such file or directory\n", code: 1},
		{name: "chmod through a link",
			script: `ln -s $V/secret.txt /data/l; chmod 777 /data/l; ln -s $V /data/vd; chmod 777 /data/vd/secret.txt`,
			stderr: "chmod: /data/l: No such file or directory\nchmod: /data/vd/secret.txt: No such file or directory\n", code: 1},
		{name: "cp from a link to outside",
			script: `ln -s $V/secret.txt /data/l; cp /data/l /tmp/copy`,
			stderr: "cp: can't stat '/data/l': No such file or directory\n", code: 1},
		{name: "touch through a link",
			script: `ln -s $V/secret.txt /data/l; touch /data/l`,
			stderr: "touch: /data/l: No such file or directory\n", code: 1},
		{name: "tee through a link",
			script: `ln -s $V/secret.txt /data/l; echo x | tee /data/l`,
			stdout: "x\n", stderr: "tee: /data/l: No such file or directory\n", code: 1},
		{name: "dangling link creates its target in the container's view",
			script: `ln -s /tmp/made /data/l; echo m > /data/l; cat /tmp/made; ls /data`, stdout: "m\nl\n"},
		{name: "mount point cannot be removed",
			script: `rm -rf /data; rmdir /data; mv /data /moved; ls -d /data`,
			stdout: "/data\n",
			stderr: "rm: can't remove '/data': Resource busy\nrmdir: '/data': Resource busy\nmv: can't rename '/data': Resource busy\n", code: 0},
		{name: "long component",
			script: `touch /data/` + strings.Repeat("n", 256),
			stderr: "touch: /data/" + strings.Repeat("n", 256) + ": File name too long\n", code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// x two levels below base: on the host, ../../victims from x
			// and ../victims from x/.. name the victims.
			base := t.TempDir()
			x, v := filepath.Join(base, "m", "x"), filepath.Join(base, "victims")
			if err := os.MkdirAll(x, 0o755); err != nil {
				t.Fatal(err)
			}
			plantVictims(t, v)
			fsys := newFS(t, FSConfig{Hostname: "testhost", Mounts: []Mount{{ContainerPath: "/data", HostPath: x}}})
			expand := strings.NewReplacer("$V", v, "$X", x).Replace
			out, errOut, code := sh(t, fsys, expand(tc.script))
			if out != expand(tc.stdout) || errOut != expand(tc.stderr) || code != tc.code {
				t.Errorf("sh -c %q\n got stdout %q stderr %q code %d\nwant stdout %q stderr %q code %d", expand(tc.script), out, errOut, code, expand(tc.stdout), expand(tc.stderr), tc.code)
			}
			if tc.host != "" {
				p := filepath.Join(x, tc.host)
				got := ""
				if t, err := os.Readlink(p); err == nil {
					got = "-> " + t
				} else if data, err := os.ReadFile(p); err == nil {
					got = string(data)
				} else {
					got = err.Error()
				}
				if got != expand(tc.hostData) {
					t.Errorf("host %s = %q, want %q", p, got, expand(tc.hostData))
				}
			}
		})
	}
}

// TestFSSwappedSymlink: a directory below the mount replaced by a symlink to
// outside by someone else (a host process, another container), before the
// container resolves it or between the container's check and its use.
func TestFSSwappedSymlink(t *testing.T) {
	swap := func(tb testing.TB, x, v string) {
		tb.Helper()
		if err := os.RemoveAll(filepath.Join(x, "sub")); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink(v, filepath.Join(x, "sub")); err != nil {
			tb.Fatal(err)
		}
	}
	setup := func(t *testing.T) (*FS, string, string) {
		base := t.TempDir()
		x, v := filepath.Join(base, "x"), filepath.Join(base, "victims")
		if err := os.MkdirAll(filepath.Join(x, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(x, "sub", "secret.txt"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		plantVictims(t, v)
		return newFS(t, FSConfig{Hostname: "testhost", Mounts: []Mount{{ContainerPath: "/data", HostPath: x}}}), x, v
	}

	t.Run("before resolution", func(t *testing.T) {
		fsys, x, v := setup(t)
		swap(t, x, v)
		_, errOut, code := sh(t, fsys, "cat /data/sub/secret.txt; echo x > /data/sub/secret.txt; rm -rf /data/sub/vdir; chmod 777 /data/sub/secret.txt; touch /data/sub/new")
		if code == 0 || strings.Count(errOut, "No such file or directory") != 4 {
			t.Errorf("through a swapped-in symlink: code %d stderr %q", code, errOut)
		}
	})

	// The mount's own host directory replaced through another mount of the
	// same container: the mount pins the directory it was made of.
	t.Run("mount source replaced", func(t *testing.T) {
		base := t.TempDir()
		x, v := filepath.Join(base, "x"), filepath.Join(base, "victims")
		if err := os.Mkdir(x, 0o755); err != nil {
			t.Fatal(err)
		}
		plantVictims(t, v)
		fsys := newFS(t, FSConfig{Hostname: "testhost", Mounts: []Mount{
			{ContainerPath: "/data", HostPath: x},
			{ContainerPath: "/base", HostPath: base},
		}})
		_, errOut, code := sh(t, fsys, "rm -rf /base/x; ln -s "+v+" /base/x; cat /data/secret.txt; echo x > /data/new; ls /data")
		want := "cat: can't open '/data/secret.txt': No such file or directory\nsh: can't create /data/new: No such file or directory\nls: /data: No such file or directory\n"
		if errOut != want || code != 1 {
			t.Errorf("stderr %q code %d, want %q 1", errOut, code, want)
		}
		// The symlink the container made in /base is its own business
		// (victims lists only what is under v).
	})
}

// TestFSSymlinkLimit: Linux follows 40 symlinks in one resolution and fails
// the 41st with ELOOP.
func TestFSSymlinkLimit(t *testing.T) {
	x := t.TempDir()
	if err := os.WriteFile(filepath.Join(x, "end"), []byte("end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// l0 -> l1 -> ... -> l40 -> end: l40 is 1 link away, l0 is 41.
	for i := 40; i >= 0; i-- {
		next := "end"
		if i < 40 {
			next = fmt.Sprintf("l%d", i+1)
		}
		if err := os.Symlink(next, filepath.Join(x, fmt.Sprintf("l%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fsys := newFS(t, FSConfig{Mounts: []Mount{{ContainerPath: "/data", HostPath: x}}})
	if data, err := fsys.ReadFile("/data/l1"); err != nil || string(data) != "end\n" {
		t.Errorf("40 links: %q, %v", data, err)
	}
	if _, err := fsys.ReadFile("/data/l0"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("41 links: %v, want ELOOP", err)
	}
	// The same chain in the container's own tree.
	for i := 40; i >= 0; i-- {
		next := "/tmp/end"
		if i < 40 {
			next = fmt.Sprintf("/tmp/l%d", i+1)
		}
		if err := fsys.Symlink(next, fmt.Sprintf("/tmp/l%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.WriteFile("/tmp/end", []byte("mem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := fsys.ReadFile("/tmp/l1"); err != nil || string(data) != "mem\n" {
		t.Errorf("40 links in memory: %q, %v", data, err)
	}
	if _, err := fsys.ReadFile("/tmp/l0"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("41 links in memory: %v, want ELOOP", err)
	}
}

// TestFSMountsAcrossViews: symlinks crossing between mounts and the
// container's tree, rename between mounts, read-only mounts, file mounts.
func TestFSMountsAcrossViews(t *testing.T) {
	setup := func(t *testing.T) (mounts []Mount, base string) {
		base = t.TempDir()
		a, b, ro := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "ro")
		for _, d := range []string{a, b, ro} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		file := filepath.Join(base, "hosts")
		if err := os.WriteFile(file, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ro, "data"), []byte("ro data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// A symlink planted in the read-only source by the host, into the writable mount.
		if err := os.Symlink("/b/target", filepath.Join(ro, "to-b")); err != nil {
			t.Fatal(err)
		}
		plantVictims(t, filepath.Join(base, "victims"))
		return []Mount{
			{ContainerPath: "/a", HostPath: a},
			{ContainerPath: "/b", HostPath: b},
			{ContainerPath: "/ro", HostPath: ro, Readonly: true},
			{ContainerPath: "/etc/myhosts", HostPath: file},
		}, base
	}
	tests := []struct {
		name, script, stdout, stderr string
		code                         int
	}{
		{"link from one mount into another", "echo t > /b/t; ln -s /b/t /a/l; cat /a/l; echo more >> /a/l; cat /b/t", "t\nt\nmore\n", "", 0},
		{"rename between mounts is a copy", "echo m > /a/m; mv /a/m /b/m; cat /b/m; ls -A /a", "m\n", "", 0},
		{"read-only mount refuses links", "ln -s x /ro/l", "", "ln: /ro/l: Read-only file system\n", 1},
		{"read-only mount refuses chmod", "chmod 777 /ro/data", "", "chmod: /ro/data: Read-only file system\n", 1},
		{"a link in a read-only mount into a writable one", "echo w > /ro/to-b; cat /b/target", "w\n", "", 0},
		{"file mount reads and writes", "cat /etc/myhosts; echo '10.0.0.1 x' >> /etc/myhosts; cat /etc/myhosts", "127.0.0.1 localhost\n127.0.0.1 localhost\n10.0.0.1 x\n", "", 0},
		{"file mount is no directory", "cat /etc/myhosts/x; echo x > /etc/myhosts/y", "", "cat: can't open '/etc/myhosts/x': Not a directory\nsh: can't create /etc/myhosts/y: Not a directory\n", 1},
		{"file mount cannot be removed", "rm /etc/myhosts; ln -s /x /etc/myhosts", "", "rm: can't remove '/etc/myhosts': Resource busy\nln: /etc/myhosts: File exists\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts, _ := setup(t)
			fsys := newFS(t, FSConfig{Hostname: "testhost", Mounts: mounts})
			out, errOut, code := sh(t, fsys, tc.script)
			if out != tc.stdout || errOut != tc.stderr || code != tc.code {
				t.Errorf("sh -c %q\n got stdout %q stderr %q code %d\nwant stdout %q stderr %q code %d", tc.script, out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
	mounts, base := setup(t)
	fsys := newFS(t, FSConfig{Mounts: mounts})
	if err := fsys.WriteFile("/a/f", []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename("/a/f", "/b/f"); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("rename across mounts: %v, want EXDEV", err)
	}
	if err := fsys.Rename("/a/f", "/tmp/f"); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("rename out of a mount: %v, want EXDEV", err)
	}
	if data, err := os.ReadFile(filepath.Join(base, "hosts")); err != nil || !strings.HasPrefix(string(data), "127.0.0.1 localhost\n") {
		t.Errorf("host file behind the file mount: %q, %v", data, err)
	}
}

// TestFSKubeletVolumes: the volume layouts a kubelet hands over keep
// working: a projected/secret/configMap volume (the atomic writer's
// ..data -> ..<timestamp> links) at the service-account path, which in a
// busybox image lies behind the /var/run -> ../run symlink, and a mount
// nested in a host mount whose mount point is missing.
func TestFSKubeletVolumes(t *testing.T) {
	base := t.TempDir()
	sa := filepath.Join(base, "sa")
	ts := filepath.Join(sa, "..2026_01_01_00_00_00.000000001")
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"token", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(ts, f), []byte(f+"-data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..data/"+f, filepath.Join(sa, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(sa, "..data")); err != nil {
		t.Fatal(err)
	}
	outer, inner := filepath.Join(base, "outer"), filepath.Join(base, "inner")
	for _, d := range []string{outer, inner} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(inner, "f"), []byte("inner\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := newFS(t, FSConfig{Mounts: []Mount{
		{ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: sa, Readonly: true},
		{ContainerPath: "/vol/sub/dir", HostPath: inner}, // deeper first: mounted after /vol anyway
		{ContainerPath: "/vol", HostPath: outer},
	}})
	script := "cat /var/run/secrets/kubernetes.io/serviceaccount/token /run/secrets/kubernetes.io/serviceaccount/ca.crt; ls /var/run/secrets/kubernetes.io/serviceaccount; cat /vol/sub/dir/f; echo o > /vol/o"
	out, errOut, code := sh(t, fsys, script)
	want := "token-data\nca.crt-data\nca.crt\ntoken\ninner\n"
	if out != want || errOut != "" || code != 0 {
		t.Errorf("got stdout %q stderr %q code %d, want %q", out, errOut, code, want)
	}
	if st, err := os.Stat(filepath.Join(outer, "sub", "dir")); err != nil || !st.IsDir() {
		t.Errorf("mount point of the nested mount in the outer source: %v, %v", st, err)
	}
	if data, err := os.ReadFile(filepath.Join(outer, "o")); err != nil || string(data) != "o\n" {
		t.Errorf("outer/o = %q, %v", data, err)
	}
}
