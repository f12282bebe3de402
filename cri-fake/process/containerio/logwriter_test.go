package containerio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var fixedTime = time.Date(2026, 11, 29, 18, 0, 0, 123456789, time.UTC)

func newLogWriter(tb testing.TB) (*LogWriter, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "pod", "ctr", "0.log")
	w, err := NewLogWriter(path)
	if err != nil {
		tb.Fatal(err)
	}
	w.now = func() time.Time { return fixedTime }
	tb.Cleanup(func() { w.Close() })
	return w, path
}

func TestLogWriterFormat(t *testing.T) {
	long := strings.Repeat("x", MaxLogLine+10)
	ts := fixedTime.Format(time.RFC3339Nano)
	tests := []struct {
		name   string
		writes []string
		stream string
		want   string
	}{
		{"one line", []string{"hello\n"}, Stdout, ts + " stdout F hello\n"},
		{"split writes", []string{"hel", "lo\nwor", "ld\n"}, Stdout, ts + " stdout F hello\n" + ts + " stdout F world\n"},
		{"stderr", []string{"oops\n"}, Stderr, ts + " stderr F oops\n"},
		{"empty line", []string{"\n"}, Stdout, ts + " stdout F \n"},
		{"no newline flushed at close", []string{"hello"}, Stdout, ts + " stdout P hello\n"},
		{"long line is partial", []string{long + "\n"}, Stdout, ts + " stdout P " + long[:MaxLogLine] + "\n" + ts + " stdout F " + long[MaxLogLine:] + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, path := newLogWriter(t)
			s := w.Stream(tc.stream)
			for _, wr := range tc.writes {
				if _, err := s.Write([]byte(wr)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("log =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestLogWriterReopen(t *testing.T) {
	w, path := newLogWriter(t)
	s := w.Stream(Stdout)
	s.Write([]byte("before\n"))
	// kubelet's rotation: rename the file, then ReopenContainerLog.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("still old\n"))
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("after\n"))
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if !strings.Contains(string(old), "before") || !strings.Contains(string(old), "still old") || strings.Contains(string(old), "after") {
		t.Errorf("rotated file = %q", old)
	}
	if !strings.HasSuffix(string(cur), " stdout F after\n") || strings.Contains(string(cur), "before") {
		t.Errorf("new file = %q", cur)
	}
}

// OpenLogWriter creates the file in a directory that exists, and makes no directory: where
// there is none it fails with ErrNotExist and leaves nothing behind.
func TestOpenLogWriterNeedsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "pod", "ctr", "0.log")
	if _, err := OpenLogWriter(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenLogWriter in a missing directory: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pod")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a directory was made: %v", err)
	}
	path := filepath.Join(dir, "0.log")
	w, err := OpenLogWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("log file after open: %v, %v; want an empty file", fi, err)
	}
	w.Stream(Stdout).Write([]byte("hello\n"))
	if b, _ := os.ReadFile(path); !strings.HasSuffix(string(b), " stdout F hello\n") {
		t.Errorf("log after one line: %q", b)
	}
}
