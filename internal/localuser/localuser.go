// Package localuser gives the tests of issue 24 what they reproduce with: another, ordinary account on
// the same machine. New creates a system user with no home and no login shell (`useradd --system
// --no-create-home`), named uniquely so tests of several packages can run at once, and removes it
// when the test ends; Command runs a program as that user (a SysProcAttr Credential with its uid and
// gid and no supplementary groups), as that user's shell would.
//
// Creating a user needs root: New skips the test, saying so, when it is not root or useradd is
// missing (CI runs as root, so CI runs these tests).
package localuser

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// User is the other local user of a test.
type User struct {
	Name     string
	UID, GID int
}

// New creates the user and removes it (and every process it still runs) when the test ends.
func New(t testing.TB) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates a second, unprivileged user (useradd) to act as another local user")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skip("no useradd on PATH (Debian's passwd package): the test needs a second, unprivileged user")
	}
	b := make([]byte, 4)
	rand.Read(b)
	// System user names are at most 32 characters (useradd refuses longer ones).
	name := "plugsim-u" + hex.EncodeToString(b)
	if out, err := exec.Command(useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	u := &User{Name: name}
	t.Cleanup(func() { u.remove(t) })
	pw, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up the new user %s: %v", name, err)
	}
	u.UID, _ = strconv.Atoi(pw.Uid)
	u.GID, _ = strconv.Atoi(pw.Gid)
	return u
}

// remove kills what the user still runs and deletes the user and its group.
func (u *User) remove(t testing.TB) {
	exec.Command("pkill", "-KILL", "-U", strconv.Itoa(u.UID)).Run()
	if out, err := exec.Command("userdel", u.Name).CombinedOutput(); err != nil {
		t.Errorf("userdel %s: %v\n%s", u.Name, err, out)
	}
	// --user-group made a group of the same name; userdel removes it with the user unless another
	// user has it as a supplementary group, which nothing here gives it.
	exec.Command("groupdel", u.Name).Run()
}

// Command returns a command that runs as the user, in dir ("" for /), with a minimal environment
// (what login would give: PATH, HOME=/, USER, LOGNAME).
func (u *User) Command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = "/"
	}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/", "USER=" + u.Name, "LOGNAME=" + u.Name}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}}
	return cmd
}

// Run runs a command as the user and fails the test, with its output, when it fails.
func (u *User) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := u.Command("", name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %s %s: %v\n%s", u.Name, name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Shell runs a shell script as the user (sh -c) and fails the test when it fails.
func (u *User) Shell(t testing.TB, script string) string {
	t.Helper()
	return u.Run(t, "sh", "-c", script)
}

// TempDir returns a fresh path in /tmp (world-writable and sticky, where every user may make
// things) that does not exist yet: the place the other user makes its directories. The
// test removes whatever is there when it ends.
func TempDir(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	p := filepath.Join("/tmp", prefix+"-"+hex.EncodeToString(b))
	t.Cleanup(func() {
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	})
	return p
}

// helperEnv names the test a test binary run by TestCommand is to act out.
const helperEnv = "PLUGSIM_LOCALUSER_HELPER"

// Helper reports whether this process is a test binary TestCommand started to run the test called
// name as the other user. That test does the user's part (what a command-line tool would do, when no
// such tool can be counted on: an HTTP request, a socket) when Helper says so, and returns at once
// otherwise.
func Helper(name string) bool { return os.Getenv(helperEnv) == name }

// TestCommand returns a command that runs this test binary's test called name as the user, with env
// added to its environment. The binary is copied where the user can execute it (the go tool builds it
// in a directory only root may enter); the copy goes when the test ends.
func (u *User) TestCommand(t testing.TB, name string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := TempDir(t, "plugsim-testbin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(exe))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := u.Command("", bin, "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(cmd.Env, helperEnv+"="+name), env...)
	return cmd
}

// String names the user in messages.
func (u *User) String() string { return fmt.Sprintf("%s (uid %d)", u.Name, u.UID) }
