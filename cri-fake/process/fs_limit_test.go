package process

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/plugsim/plugsim/cri-fake/process/vfs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// layerUse is what the container's own layer is counted for, and the
// capacity of the arrays file p really holds (0 when p is "").
func layerUse(f *FS, p string) (counted, capacity int64) { return f.Held(p) }

// TestFSMemoryBound: the container's in-memory files are bounded by its
// memory limit; past it a write fails with ENOSPC and nothing more is kept.
func TestFSMemoryBound(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name   string
		script string
		stdout string
		stderr string
		code   int
		full   bool // /tmp/fill then holds the bound less what the rest of the layer is counted for, and what the programs hold
	}{
		{"cat /dev/zero fills the bound", "cat /dev/zero > /tmp/fill", "", "cat: write error: No space left on device\n", 1, true},
		{"a second file finds no room", "cat /dev/zero > /tmp/fill; echo x > /tmp/more; echo rc=$?", "rc=1\n", "cat: write error: No space left on device\nsh: can't create /tmp/more: No space left on device\n", 0, false},
		{"removing the file gives the room back", "cat /dev/zero > /tmp/fill 2>/dev/null; rm /tmp/fill; echo ok > /tmp/small; cat /tmp/small", "ok\n", "", 0, false},
		{"appending past it", "head -c 1000000 /dev/zero > /tmp/fill; cat /dev/zero >> /tmp/fill", "", "cat: write error: No space left on device\n", 1, true},
		{"yes stops at it", "yes > /tmp/fill; echo rc=$?", "rc=1\n", "", 0, true},
		{"host mounts do not count", "cat /dev/zero > /tmp/fill 2>/dev/null; head -c 2000000 /dev/zero > /data/big; wc -c < /data/big", "2000000\n", "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFS(t, FSConfig{Hostname: "testhost", MemoryLimit: limit, Mounts: []Mount{{ContainerPath: "/data", HostPath: t.TempDir()}}})
			base, _ := layerUse(fsys, "")
			out, errOut, code := sh(t, fsys, tc.script)
			if tc.full {
				// The shell's variables, the programs' argv and environment and their buffers
				// are the container's memory too (kernel/memory.go): a few KiB.
				most := limit - base - vfs.EntryCost("/tmp/fill")
				if st, err := fsys.Stat("/tmp/fill"); err != nil || st.Size() > most || st.Size() < most-64<<10 {
					t.Errorf("/tmp/fill: %v, %v; want %d bytes less what the programs hold (at most 64 KiB)", st, err, most)
				}
			}
			if out != tc.stdout || errOut != tc.stderr || code != tc.code {
				t.Errorf("sh -c %q\n got stdout %q stderr %q code %d\nwant stdout %q stderr %q code %d", tc.script, out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
			counted, capacity := layerUse(fsys, "/tmp/fill")
			if counted > limit || capacity > limit {
				t.Errorf("layer counted for %d bytes, file arrays %d bytes: over the %d bound", counted, capacity, limit)
			}
			if st, err := fsys.Stat("/tmp/fill"); err == nil && capacity-st.Size() > vfs.MaxChunk {
				t.Errorf("/tmp/fill holds %d bytes in arrays of %d", st.Size(), capacity)
			}
			if w := fsys.WritableLayerBytes(); w > limit {
				t.Errorf("WritableLayerBytes = %d, over the bound", w)
			}
		})
	}
}

// TestFSMemoryBoundDefault: without a memory limit the bound is
// DefaultMemoryLimit; a write straddling it keeps what fits.
func TestFSMemoryBoundDefault(t *testing.T) {
	fsys := newFS(t, FSConfig{})
	w, err := fsys.OpenWrite("/tmp/big", false, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// 1 MiB writes up to the bound; the last one straddles it.
	chunk := make([]byte, 1<<20)
	total := 0
	var n int
	for err == nil && total <= DefaultMemoryLimit {
		n, err = w.Write(chunk)
		total += n
	}
	if !errors.Is(err, syscall.ENOSPC) || vfs.Strerror(err) != "No space left on device" {
		t.Fatalf("write past the bound: %d, %v (%q)", n, err, vfs.Strerror(err))
	}
	if total >= DefaultMemoryLimit || total < DefaultMemoryLimit-64<<10 {
		t.Errorf("wrote %d bytes before ENOSPC, want just under %d", total, DefaultMemoryLimit)
	}
	if counted, capacity := layerUse(fsys, "/tmp/big"); counted > DefaultMemoryLimit || capacity > DefaultMemoryLimit {
		t.Errorf("held %d (array %d), over %d", counted, capacity, DefaultMemoryLimit)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("next write: %v, want ENOSPC", err)
	}
}

// TestFSMemoryBoundEntries: empty files, directories, symlinks and long
// names are counted too (a tmpfs runs out of inodes).
func TestFSMemoryBoundEntries(t *testing.T) {
	const limit = 64 << 10
	long := strings.Repeat("n", 200)
	tests := []struct {
		name string
		op   func(f *FS, i int) error
	}{
		{"mkdir", func(f *FS, i int) error { return f.Mkdir(fmt.Sprintf("/tmp/d%d", i), 0o755) }},
		{"empty files", func(f *FS, i int) error { return f.WriteFile(fmt.Sprintf("/tmp/f%d", i), nil, 0o644) }},
		{"symlinks", func(f *FS, i int) error { return f.Symlink(long, fmt.Sprintf("/tmp/l%d", i)) }},
		{"long names", func(f *FS, i int) error { return f.Mkdir(fmt.Sprintf("/tmp/%s%d", long, i), 0o755) }},
		{"rename to longer names", func(f *FS, i int) error {
			if err := f.Mkdir(fmt.Sprintf("/tmp/s%d", i), 0o755); err != nil {
				return err
			}
			return f.Rename(fmt.Sprintf("/tmp/s%d", i), fmt.Sprintf("/tmp/%s%d", long, i))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFS(t, FSConfig{MemoryLimit: limit})
			var err error
			i := 0
			for ; i < limit; i++ { // entryOverhead > 1 byte: ends long before
				if err = tc.op(fsys, i); err != nil {
					break
				}
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("after %d entries: %v, want ENOSPC", i, err)
			}
			if i > limit/vfs.EntryOverhead {
				t.Errorf("%d entries fit in %d bytes", i, limit)
			}
			if counted, _ := layerUse(fsys, ""); counted > limit {
				t.Errorf("counted %d, over %d", counted, limit)
			}
			// Removing them gives the room back.
			if err := fsys.RemoveAll("/tmp"); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Mkdir("/tmp", 0o1777); err != nil {
				t.Fatal(err)
			}
			if err := tc.op(fsys, 0); err != nil {
				t.Errorf("after removing: %v", err)
			}
		})
	}
}

// TestFSMemoryBoundOpenRemoved: a file removed while a writer holds it keeps
// its bytes counted until the writer closes, so remove-and-rewrite cannot
// hold more than the bound.
func TestFSMemoryBoundOpenRemoved(t *testing.T) {
	const limit = 1 << 20
	fsys := newFS(t, FSConfig{MemoryLimit: limit})
	w, err := fsys.OpenWrite("/tmp/a", false, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, limit/2)); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("/tmp/a"); err != nil {
		t.Fatal(err)
	}
	// The removed file still holds its half; the writer goes on into it.
	n, err := w.Write(make([]byte, limit))
	if !errors.Is(err, syscall.ENOSPC) || n >= limit/2 {
		t.Errorf("write into the removed file: %d, %v; want under %d and ENOSPC", n, err, limit/2)
	}
	if err := fsys.WriteFile("/tmp/b", make([]byte, limit/4), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("new file while the removed one is open: %v, want ENOSPC", err)
	}
	before, _ := layerUse(fsys, "")
	w.Close()
	after, _ := layerUse(fsys, "")
	if before-after < limit/2 {
		t.Errorf("closing the removed file freed %d bytes, want its %d+", before-after, limit/2)
	}
	if err := fsys.WriteFile("/tmp/b", make([]byte, limit/4), 0o644); err != nil {
		t.Errorf("new file after the close: %v", err)
	}
	// Overwriting a file by rename frees the old one.
	if err := fsys.WriteFile("/tmp/c", make([]byte, limit/4), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if err := fsys.WriteFile("/tmp/c.new", make([]byte, limit/4), 0o644); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := fsys.Rename("/tmp/c.new", "/tmp/c"); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}

// TestFSMemoryLimitFromCRI: the container's memory limit (CreateContainer's
// linux resources) is the bound, and SetMemoryLimit changes it
// (UpdateContainerResources).
func TestFSMemoryLimitFromCRI(t *testing.T) {
	cfg := &runtimeapi.ContainerConfig{
		Command: []string{"sh"},
		Linux:   &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 256 << 10}},
	}
	spec, err := FromCRI(cfg, &runtimeapi.PodSandboxConfig{}, ImageConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys := spec.FS
	if err := fsys.WriteFile("/tmp/a", make([]byte, 300<<10), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("300 KiB under a 256 KiB limit: %v, want ENOSPC", err)
	}
	fsys.SetMemoryLimit(1 << 20)
	if err := fsys.WriteFile("/tmp/a", make([]byte, 300<<10), 0o644); err != nil {
		t.Errorf("300 KiB after raising the limit to 1 MiB: %v", err)
	}
	fsys.SetMemoryLimit(128 << 10)
	if err := fsys.WriteFile("/tmp/b", []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a new file after lowering the limit below what is held: %v, want ENOSPC", err)
	}
	if data, err := fsys.ReadFile("/tmp/a"); err != nil || len(data) != 300<<10 {
		t.Errorf("what was held stays: %d bytes, %v", len(data), err)
	}
	fsys.SetMemoryLimit(0)
	if err := fsys.WriteFile("/tmp/b", make([]byte, 2<<20), 0o644); err != nil {
		t.Errorf("2 MiB with no limit (DefaultMemoryLimit): %v", err)
	}
}

// TestFSReadWhileAppending: a reader sees the content as it was when it
// opened the file, while a writer appends (the bytes are shared, never
// changed in place; -race checks it).
func TestFSReadWhileAppending(t *testing.T) {
	fsys := newFS(t, FSConfig{})
	w, err := fsys.OpenWrite("/tmp/log", false, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	line := []byte(strings.Repeat("x", 999) + "\n")
	for i := 0; i < 100; i++ {
		w.Write(line)
	}
	r, err := fsys.Open("/tmp/log")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			w.Write(line)
		}
	}()
	data, err := io.ReadAll(r)
	<-done
	if err != nil || len(data) != 100*len(line) || strings.Count(string(data), "\n") != 100 {
		t.Errorf("reader got %d bytes (%d lines), %v; want the 100 lines there at open", len(data), strings.Count(string(data), "\n"), err)
	}
	if st, err := fsys.Stat("/tmp/log"); err != nil || st.Size() != 300*int64(len(line)) {
		t.Errorf("after the appends: %v, %v", st, err)
	}
}
