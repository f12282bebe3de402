package endpoint

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"unix:///run/x.sock", "/run/x.sock", ""},
		{"unix://rel/x.sock", "rel/x.sock", ""},
		{"/run/x.sock", "/run/x.sock", ""},
		{"tcp://127.0.0.1:1", "", "only unix sockets"},
		{"unix://", "", "empty"},
		{"", "", "empty"},
		{"unix:///" + strings.Repeat("a", 106), "/" + strings.Repeat("a", 106), ""},
		{"unix:///" + strings.Repeat("a", 107), "", `is 108 bytes, the limit is 107`},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sub", "a.sock")
	l, err := Listen(URL(sock))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v (%v), want 0660", fi.Mode().Perm(), err)
	}
	// A live socket is not taken over.
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Listen on a live socket: err = %v", err)
	}
	// A stale socket (its server gone, the file left behind) is replaced.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket file should still exist: %v", err)
	}
	l2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
	// Anything else in the way is not ours to delete.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: err = %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Fatal("regular file was touched")
	}
}

// longDir makes a directory whose path is n bytes long (under the test's temp dir, which
// t.TempDir removes).
func longDir(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", n-len(dir)-1))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(long) != n {
		t.Fatalf("made %d bytes", len(long))
	}
	return long
}

func TestTooLongPathIsNamed(t *testing.T) {
	sock := filepath.Join(longDir(t, 100), "run", "csi", "controller.sock")
	_, err := Listen(URL(sock))
	want := fmt.Sprintf("unix socket path %q is %d bytes, the limit is 107", sock, len(sock))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Listen(%d bytes) err = %v, want %q", len(sock), err, want)
	}
}

// MkdirTemp makes room for its sockets whatever $TMPDIR is: under it when they fit, in /tmp when
// they do not.
func TestMkdirTemp(t *testing.T) {
	const name = "csi/controller.sock"
	short := t.TempDir()
	for _, tc := range []struct {
		name, tmpdir, wantBase string
	}{
		{"short TMPDIR", short, short},
		{"100-byte TMPDIR", longDir(t, 100), "/tmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", tc.tmpdir)
			d, err := MkdirTemp("plugsim-", len(name))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			if filepath.Dir(d) != tc.wantBase {
				t.Errorf("made %s, want it in %s", d, tc.wantBase)
			}
			l, err := Listen(URL(filepath.Join(d, name)))
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
		})
	}
}
