package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new" {
		t.Fatalf("read back %q, %v", b, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// The mode is the one asked for, whatever the umask would have made of it.
	if err := Write(path, []byte("again"), 0o664); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o664 {
		t.Errorf("mode %v, want 0664", fi.Mode().Perm())
	}
	assertOnly(t, dir, "state.json")
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// The target is a directory: the rename fails, the old entry stays, no temporary file is left.
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("data"), 0o644); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	assertOnly(t, dir, "taken")
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("data"), 0o644); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

// Concurrent writers of one path each use their own temporary file: the file ends up as one of
// them wrote it, whole.
func TestWriteConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Write(path, bytes.Repeat([]byte{'a' + byte(i)}, 64<<10), 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 64<<10 || strings.Trim(string(b), string(b[:1])) != "" {
		t.Fatalf("file of %d bytes mixes writers (%v)", len(b), err)
	}
	assertOnly(t, dir, "f")
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("directory holds %v, want %v", got, names)
	}
}
