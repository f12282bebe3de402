package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFSSwappedSymlink: a directory below the mount replaced by a symlink to
// outside by someone else (a host process, another container) between the
// container's check and its use (package process tests the same before
// resolution, through the applets).
func TestFSSwappedSymlink(t *testing.T) {
	// swap makes x/sub a symlink to v.
	swap := func(tb testing.TB, x, v string) {
		sub := filepath.Join(x, "sub")
		if err := errors.Join(os.RemoveAll(sub), os.Symlink(v, sub)); err != nil {
			tb.Fatal(err)
		}
	}
	setup := func(t *testing.T) (*FS, string, string) {
		base := t.TempDir()
		x, v := filepath.Join(base, "x"), filepath.Join(base, "victims")
		for _, d := range []string{filepath.Join(x, "sub"), v} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(x, "sub", "secret.txt"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v, "secret.txt"), []byte("victim\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fsys, err := NewFS(FSConfig{Hostname: "testhost", Mounts: []Mount{{ContainerPath: "/data", HostPath: x}}})
		if err != nil {
			t.Fatal(err)
		}
		return fsys, x, v
	}

	// Between check and use: the operation's path was resolved while sub was
	// a directory; the host operation then meets the symlink. It goes
	// through the mount's os.Root, which refuses to leave x.
	ops := []struct {
		name string
		op   func(l loc, r *os.Root) error
	}{
		{"open for writing", func(l loc, r *os.Root) error {
			f, err := r.OpenFile(l.rel, os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"open for reading", func(l loc, r *os.Root) error {
			f, err := r.Open(l.rel)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"chmod", func(l loc, r *os.Root) error { return r.Chmod(l.rel, 0o777) }},
		{"remove", func(l loc, r *os.Root) error { return r.Remove(l.rel) }},
		{"remove all", func(l loc, r *os.Root) error { return r.RemoveAll(l.rel) }},
		{"rename", func(l loc, r *os.Root) error { return r.Rename(l.rel, "moved") }},
	}
	for _, tc := range ops {
		t.Run("after resolution/"+tc.name, func(t *testing.T) {
			fsys, x, v := setup(t)
			var roots hostRoots
			defer roots.close()
			l, err := fsys.walk(&roots, "/data/sub/secret.txt", true, false)
			if err != nil || l.kind != locHost || l.rel != "sub/secret.txt" {
				t.Fatalf("walk = %+v, %v", l, err)
			}
			r, err := roots.get(l.m)
			if err != nil {
				t.Fatal(err)
			}
			swap(t, x, v)
			if err := tc.op(l, r); err == nil {
				t.Errorf("%s through the swapped-in symlink succeeded", tc.name)
			}
		})
	}

}
