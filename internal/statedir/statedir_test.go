package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/internal/localuser"
)

// wantRefused fails unless err is a refusal naming path, the owner and the mode.
func wantRefused(t *testing.T, err error, path, ownerName, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want a refusal of %s", err, path)
	}
	msg := err.Error()
	for _, s := range []string{path, ownerName, reason, "mode "} {
		if !strings.Contains(msg, s) {
			t.Errorf("refusal %q does not name %q", msg, s)
		}
	}
}

// The first reproduction: another user makes the directory first (mkdir /tmp/plugsim), and
// root is then given it. Check and Prepare refuse it, naming the user and the mode, and Prepare
// makes nothing in it.
func TestADirectoryAnotherUserMadeIsRefused(t *testing.T) {
	u := localuser.New(t)
	dir := localuser.TempDir(t, "plugsim-statedir")
	u.Run(t, "mkdir", dir)
	u.Run(t, "mkdir", "-p", dir+"/opt/cni/bin")
	for _, f := range []func(string, ...string) error{Check, Prepare} {
		wantRefused(t, f(dir), dir, u.Name, "owned by another user")
	}
	// A directory of the user's further down: the way to it is refused.
	wantRefused(t, Prepare(filepath.Join(dir, "node")), dir, u.Name, "owned by another user")
	if _, err := os.Stat(filepath.Join(dir, "node")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Prepare made %s/node inside the other user's directory", dir)
	}
}

// A root-owned directory holding an entry of the other user's (an opt/ it replaced while the
// directory was its own, then chowned), a file writable by everyone, a symlink of the user's: each
// is refused by name.
func TestAnEntryAnotherUserOwnsOrMayWriteIsRefused(t *testing.T) {
	u := localuser.New(t)
	dir := t.TempDir()
	opt := filepath.Join(dir, "opt")
	if err := os.MkdirAll(filepath.Join(opt, "cni", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir); err != nil {
		t.Fatalf("a clean root-owned directory: %v", err)
	}
	plugin := filepath.Join(opt, "cni", "bin", "cni-fake")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(plugin, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, Check(dir), plugin, u.Name, "owned by another user")
	os.Lchown(plugin, 0, 0)
	os.Chmod(plugin, 0o757)
	wantRefused(t, Check(dir), plugin, "uid 0", "writable by other users")
	os.Chmod(plugin, 0o775) // group root may write: root's group is root's
	if err := Check(dir); err != nil {
		t.Errorf("a file only root's group may write: %v", err)
	}
	link := filepath.Join(dir, "crictl.yaml")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir); err != nil {
		t.Errorf("a root-owned symlink: %v", err)
	}
	os.Lchown(link, u.UID, u.GID)
	wantRefused(t, Check(dir), link, u.Name, "owned by another user")
	os.Remove(link)
	// The pods' data is theirs: a skipped subtree is not walked, though its root is checked.
	pods := filepath.Join(dir, "kubelet", "pods", "uid1", "volumes")
	if err := os.MkdirAll(pods, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pods, 0o777)
	if err := Check(dir, "kubelet/pods"); err != nil {
		t.Errorf("an emptyDir-like 0777 directory in a skipped subtree: %v", err)
	}
	wantRefused(t, Check(dir), pods, "uid 0", "writable by other users")
}

// The way to the directory: a parent the other user owns, or one everyone may write without the
// sticky bit, is refused; /tmp (sticky) is not; a symlink of the user's on the way is refused.
func TestTheWayToTheDirectory(t *testing.T) {
	u := localuser.New(t)
	base := localuser.TempDir(t, "plugsim-way")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(filepath.Join(base, "a", "node")); err != nil {
		t.Fatalf("a new directory under /tmp: %v", err)
	}
	for _, p := range []string{base + "/a", base + "/a/node"} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s made with mode %v, want 0700", p, fi.Mode().Perm())
		}
	}
	os.Chmod(base, 0o777)
	wantRefused(t, Check(filepath.Join(base, "a", "node")), base, "uid 0", "writable by other users (and not sticky)")
	os.Chmod(base, 0o777|os.ModeSticky)
	if err := Check(filepath.Join(base, "a", "node")); err != nil {
		t.Errorf("a sticky parent: %v", err)
	}
	os.Chmod(base, 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "a"), link); err != nil {
		t.Fatal(err)
	}
	if err := Check(filepath.Join(link, "node")); err != nil {
		t.Errorf("through a root-owned symlink: %v", err)
	}
	os.Lchown(link, u.UID, u.GID)
	wantRefused(t, Check(filepath.Join(link, "node")), link, u.Name, "a symlink owned by another user")

	// Missing: an error that says so.
	if err := Check(filepath.Join(base, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v, want ErrNotExist", err)
	}
	// An existing directory is made 0700.
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	if err := Prepare(open); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o700 {
		t.Errorf("Prepare left %s at %v, want 0700", open, fi.Mode().Perm())
	}
}
