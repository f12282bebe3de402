package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// inMountNS runs fn on one locked OS thread in a mount namespace of its own
// (every mount private to it), so nothing the test mounts reaches the host's
// table; the thread ends with fn. fn must not hand work to other goroutines:
// they run in the host's namespace.
func inMountNS(t *testing.T, fn func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mount propagation needs mounts (CAP_SYS_ADMIN); run the tests as root to cover it")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread and its namespace end here
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("unshare mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- fmt.Errorf("make mounts private: %w", err)
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// propagationHost is critest's host side (createHostPathForMountPropagation):
// mnt bind-mounted on itself with the given propagation, an empty mnt/pm,
// and src holding a flag file, to be mounted at mnt/pm later.
type propagationHost struct{ mnt, pm, src string }

func newPropagationHost(base string, flags uintptr) (propagationHost, error) {
	h := propagationHost{mnt: filepath.Join(base, "mnt"), src: filepath.Join(base, "src")}
	h.pm = filepath.Join(h.mnt, "pm")
	return h, errors.Join(
		os.MkdirAll(h.pm, 0o755),
		os.MkdirAll(h.src, 0o755),
		os.WriteFile(filepath.Join(h.src, "flagFile"), nil, 0o644),
		unix.Mount(h.mnt, h.mnt, "", unix.MS_BIND|unix.MS_REC, ""),
		unix.Mount("", h.mnt, "", flags|unix.MS_REC, ""),
	)
}

// testImage is a small image with an /etc of its own (NewFS then writes
// /etc/hostname and the others).
func testImage() *Layer { return NewLayer().AddDir("/etc", 0o755).AddFile("/bin/sh", nil, 0o755) }

func names(f *FS, p string) ([]string, error) {
	ents, err := f.ReadDir(p)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, err
}

func hostNames(p string) []string {
	ents, _ := os.ReadDir(p)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestPropagationHostToContainer: what the host mounts below a mount's host
// path after the view is built is seen through an rslave or rshared mount and
// not through an rprivate one — critest's first check, each way.
func TestPropagationHostToContainer(t *testing.T) {
	for _, tc := range []struct {
		prop  Propagation
		flags uintptr
		sees  bool
	}{
		{PropagationPrivate, unix.MS_PRIVATE, false},
		{PropagationPrivate, unix.MS_SHARED, false},
		{PropagationHostToContainer, unix.MS_SHARED, true},
		{PropagationBidirectional, unix.MS_SHARED, true},
	} {
		t.Run(fmt.Sprintf("%v on %#x", tc.prop, tc.flags), func(t *testing.T) {
			base := t.TempDir()
			inMountNS(t, func() error {
				h, err := newPropagationHost(base, tc.flags)
				if err != nil {
					return err
				}
				f, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: h.mnt, HostPath: h.mnt, Propagation: tc.prop}}})
				if err != nil {
					return err
				}
				if short := f.CopyPrivateMounts(NewTreeBudget(1)); short != 0 {
					return fmt.Errorf("%d mounts left uncopied", short)
				}
				defer f.Release()
				if err := unix.Mount(h.src, h.pm, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
					return err
				}
				got, err := names(f, h.pm)
				if err != nil {
					return err
				}
				if sees := len(got) > 0; sees != tc.sees {
					return fmt.Errorf("the container lists %q in %s, want the host's new mount seen: %v", got, h.pm, tc.sees)
				}
				if host := hostNames(h.pm); len(host) != 1 {
					return fmt.Errorf("the host lists %q", host)
				}
				return nil
			})
		})
	}
}

// TestPropagationContainerToHost: `mount --bind` in the container below an
// rshared mount is a real mount on the host, both for the container's own
// tree (a tmpfs copy) and for a host-backed directory; below rslave or
// rprivate, or from a container that is not privileged, it stays in the
// container. Release (container removal) takes the host's mounts away.
func TestPropagationContainerToHost(t *testing.T) {
	for _, tc := range []struct {
		prop       Propagation
		privileged bool
		src        string
		hostSees   bool
	}{
		{PropagationBidirectional, true, "/etc", true},
		{PropagationBidirectional, true, "/data", true},
		{PropagationBidirectional, false, "/etc", false},
		{PropagationHostToContainer, true, "/etc", false},
		{PropagationPrivate, true, "/etc", false},
		{PropagationPrivate, true, "/data", false},
	} {
		t.Run(fmt.Sprintf("%v privileged=%v %s", tc.prop, tc.privileged, tc.src), func(t *testing.T) {
			base, data := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(data, "from-data"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			inMountNS(t, func() error {
				h, err := newPropagationHost(base, unix.MS_SHARED)
				if err != nil {
					return err
				}
				f, err := NewFS(FSConfig{Image: testImage(), Hostname: "h", Mounts: []Mount{
					{ContainerPath: h.mnt, HostPath: h.mnt, Propagation: tc.prop},
					{ContainerPath: "/data", HostPath: data},
				}})
				if err != nil {
					return err
				}
				f.CopyPrivateMounts(NewTreeBudget(2))
				cmp := filepath.Join(h.mnt, "cmp")
				if err := f.MkdirAll(cmp, 0o755); err != nil {
					return err
				}
				if err := f.BindMount(tc.src, cmp, false, tc.privileged); err != nil {
					return err
				}
				want := "hostname"
				if tc.src == "/data" {
					want = "from-data"
				}
				inside, err := names(f, cmp)
				if err != nil || !strings.Contains(strings.Join(inside, " "), want) {
					return fmt.Errorf("the container lists %q (%v) at %s, want %s among them", inside, err, cmp, want)
				}
				host := hostNames(cmp)
				if hostSees := len(host) > 0; hostSees != tc.hostSees {
					return fmt.Errorf("the host lists %q at %s, want the mount seen: %v", host, cmp, tc.hostSees)
				}
				if err := f.Release(); err != nil {
					return err
				}
				if host := hostNames(cmp); len(host) != 0 {
					return fmt.Errorf("after Release the host still lists %q at %s", host, cmp)
				}
				return nil
			})
		})
	}
}

// TestPropagationCheck: containerd refuses an rshared mount whose host path
// is not on a shared mount, and an rslave one not on a shared or slave
// mount, with its own messages; NewFS fails with them.
func TestPropagationCheck(t *testing.T) {
	base := t.TempDir()
	inMountNS(t, func() error {
		h, err := newPropagationHost(base, unix.MS_PRIVATE)
		if err != nil {
			return err
		}
		for _, tc := range []struct {
			prop Propagation
			want string
		}{
			{PropagationBidirectional, fmt.Sprintf("path %q is mounted on %q but it is not a shared mount", h.pm, h.mnt)},
			{PropagationHostToContainer, fmt.Sprintf("path %q is mounted on %q but it is not a shared or slave mount", h.pm, h.mnt)},
		} {
			_, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "/m", HostPath: h.pm, Propagation: tc.prop}}})
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				return fmt.Errorf("%v on a private mount: %v, want %q", tc.prop, err, tc.want)
			}
		}
		// A slave mount takes rslave and still refuses rshared.
		if err := unix.Mount("", h.mnt, "", unix.MS_SHARED, ""); err != nil {
			return err
		}
		slave := filepath.Join(base, "slave")
		if err := errors.Join(os.Mkdir(slave, 0o755), unix.Mount(h.mnt, slave, "", unix.MS_BIND, ""), unix.Mount("", slave, "", unix.MS_SLAVE, "")); err != nil {
			return err
		}
		if _, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "/m", HostPath: slave, Propagation: PropagationHostToContainer}}}); err != nil {
			return fmt.Errorf("rslave on a slave mount: %v", err)
		}
		if _, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "/m", HostPath: slave, Propagation: PropagationBidirectional}}}); err == nil {
			return errors.New("rshared on a slave mount was accepted")
		}
		return nil
	})
}

// TestMountInfoPropagation: /proc/self/mountinfo shows an rshared mount in
// the host mount's peer group (shared:N), an rslave one as its slave
// (master:N), an rprivate one with neither, as Linux prints them.
func TestMountInfoPropagation(t *testing.T) {
	base := t.TempDir()
	inMountNS(t, func() error {
		h, err := newPropagationHost(base, unix.MS_SHARED)
		if err != nil {
			return err
		}
		host, err := mountinfo.Read()
		if err != nil {
			return err
		}
		hm, _ := mountinfo.Lookup(host, h.mnt)
		peer := hm.Tag("shared")
		if peer == 0 {
			return fmt.Errorf("the host mount %+v is not shared", hm)
		}
		f, err := NewFS(FSConfig{Mounts: []Mount{
			{ContainerPath: "/shared", HostPath: h.mnt, Propagation: PropagationBidirectional},
			{ContainerPath: "/slave", HostPath: h.mnt, Propagation: PropagationHostToContainer},
			{ContainerPath: "/private", HostPath: h.mnt},
		}})
		if err != nil {
			return err
		}
		defer f.Release()
		got := mountinfo.Parse(f.MountInfo())
		want := map[string]string{"/shared": fmt.Sprintf("shared:%d", peer), "/slave": fmt.Sprintf("master:%d", peer), "/private": "", "/": "", "/proc": ""}
		if len(got) != len(want) {
			return fmt.Errorf("mountinfo has %d mounts, want %d:\n%s", len(got), len(want), f.MountInfo())
		}
		for _, m := range got {
			if w, ok := want[m.MountPoint]; !ok || strings.Join(m.Optional, " ") != w {
				return fmt.Errorf("mount %s shows %q, want %q:\n%s", m.MountPoint, m.Optional, w, f.MountInfo())
			}
			if m.MountPoint == "/shared" && (m.Root != hm.Root || m.FSType != hm.FSType) {
				return fmt.Errorf("mount /shared: root %q type %q, want the host's %q %q", m.Root, m.FSType, hm.Root, hm.FSType)
			}
		}
		return nil
	})
}

// TestBindMountOwnTree: a bind of the container's own tree shows its source
// at the mount point until umount; umount of what is not a mount point is
// EINVAL, as the kernel answers.
func TestBindMountOwnTree(t *testing.T) {
	f, err := NewFS(FSConfig{Image: testImage(), Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.MkdirAll("/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.BindMount("/etc", "/x", false, true); err != nil {
		t.Fatal(err)
	}
	if data, err := f.ReadFile("/x/hostname"); err != nil || string(data) != "h\n" {
		t.Errorf("/x/hostname through the bind: %q, %v", data, err)
	}
	if got := string(f.MountInfo()); !strings.Contains(got, " /etc /x ") {
		t.Errorf("mountinfo does not list the bind:\n%s", got)
	}
	// A bind of / at /y does not contain itself: /y/y is the empty mount point.
	if err := errors.Join(f.MkdirAll("/y", 0o755), f.BindMount("/", "/y", false, true)); err != nil {
		t.Fatal(err)
	}
	if got, err := names(f, "/y/y"); err != nil || len(got) != 0 {
		t.Errorf("/y/y lists %q, %v; want the empty mount point", got, err)
	}
	if data, err := f.ReadFile("/y/etc/hostname"); err != nil || string(data) != "h\n" {
		t.Errorf("/y/etc/hostname: %q, %v", data, err)
	}
	if err := f.Unmount("/x"); err != nil {
		t.Fatal(err)
	}
	if got, err := names(f, "/x"); err != nil || len(got) != 0 {
		t.Errorf("/x after umount lists %q, %v", got, err)
	}
	if err := f.Unmount("/x"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("umount of a plain directory: %v, want EINVAL", err)
	}
	if err := f.BindMount("/etc", "/nowhere", false, true); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("bind onto a missing mount point: %v, want ENOENT", err)
	}
	if err := f.BindMount("/etc/hostname", "/x", false, true); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("bind of a file onto a directory: %v, want ENOTDIR", err)
	}
}

// BenchmarkNewFSMount is what a directory mount's propagation costs when the
// view is built and released: rprivate takes a private copy of the host
// tree (open_tree, as root), rslave reads the host's mountinfo for
// containerd's check, and "no mount" is the floor.
func BenchmarkNewFSMount(b *testing.B) {
	dir := b.TempDir()
	for _, bc := range []struct {
		name   string
		mounts []Mount
	}{
		{"no mount", nil},
		{"rprivate", []Mount{{ContainerPath: "/data", HostPath: dir}}},
		{"rslave", []Mount{{ContainerPath: "/data", HostPath: "/", Propagation: PropagationHostToContainer}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			img, budget := testImage(), NewTreeBudget(1)
			for b.Loop() {
				f, err := NewFS(FSConfig{Image: img, Mounts: bc.mounts})
				if err != nil {
					b.Skip(err) // "/" is not a shared or slave mount here
				}
				f.CopyPrivateMounts(budget)
				if err := f.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTreeBudget: private copies are taken while the budget lasts, given
// back by Release; past it a mount reads the host's view and is counted.
func TestTreeBudget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("private copies need CAP_SYS_ADMIN; run the tests as root to cover them")
	}
	dir := t.TempDir()
	b := NewTreeBudget(1)
	views := make([]*FS, 2)
	for i := range views {
		f, err := NewFS(FSConfig{Mounts: []Mount{{ContainerPath: "/d", HostPath: dir}}})
		if err != nil {
			t.Fatal(err)
		}
		views[i] = f
	}
	if short := views[0].CopyPrivateMounts(b); short != 0 {
		t.Fatalf("first view: %d short", short)
	}
	if short := views[1].CopyPrivateMounts(b); short != 1 {
		t.Fatalf("second view: %d short, want 1 (the budget is spent)", short)
	}
	if err := views[0].Release(); err != nil {
		t.Fatal(err)
	}
	if short := views[1].CopyPrivateMounts(b); short != 0 {
		t.Fatalf("second view after the first's Release: %d short", short)
	}
	views[1].Release()
	if short := views[1].CopyPrivateMounts(b); short != 0 || len(views[1].mtab.trees) != 1 || !b.take() {
		t.Fatalf("a released view took copies or kept its budget: %d short, %d trees", short, len(views[1].mtab.trees))
	}
}

// TestMountBounds: a container's mount table is bounded (ENOSPC, as past
// fs.mount-max), and so is what its tmpfs copies hold on the host (its
// memory limit together); a mount made on the host is in its mountinfo.
func TestMountBounds(t *testing.T) {
	f, err := NewFS(FSConfig{Image: testImage(), Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.MkdirAll("/x", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range maxRuntimeMounts {
		if err := f.BindMount("/etc", "/x", false, true); err != nil {
			t.Fatalf("bind %d: %v", i, err)
		}
	}
	if err := f.BindMount("/etc", "/x", false, true); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("bind past %d: %v, want ENOSPC", maxRuntimeMounts, err)
	}
	for range maxRuntimeMounts {
		if err := f.Unmount("/x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Unmount("/x"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("umount once every bind is gone: %v, want EINVAL", err)
	}

	base := t.TempDir()
	inMountNS(t, func() error {
		h, err := newPropagationHost(base, unix.MS_SHARED)
		if err != nil {
			return err
		}
		// One copy of /etc takes a megabyte of headroom plus its pages: two do not fit in 2 MiB.
		f, err := NewFS(FSConfig{Image: testImage(), Hostname: "h", MemoryLimit: 2 << 20, Mounts: []Mount{{ContainerPath: h.mnt, HostPath: h.mnt, Propagation: PropagationBidirectional}}})
		if err != nil {
			return err
		}
		defer f.Release()
		a, b := filepath.Join(h.mnt, "a"), filepath.Join(h.mnt, "b")
		if err := errors.Join(f.MkdirAll(a, 0o755), f.MkdirAll(b, 0o755), f.BindMount("/etc", a, false, true)); err != nil {
			return err
		}
		if err := f.BindMount("/etc", b, false, true); !errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("a second copy past the memory limit: %v, want ENOSPC", err)
		}
		for _, m := range mountinfo.Parse(f.MountInfo()) {
			if m.MountPoint == a {
				if m.FSType != "tmpfs" || m.Tag("shared") == 0 {
					return fmt.Errorf("the host mount at %s shows as %+v, want a shared tmpfs", a, m)
				}
				return nil
			}
		}
		return fmt.Errorf("mountinfo does not list the host mount at %s:\n%s", a, f.MountInfo())
	})
}
