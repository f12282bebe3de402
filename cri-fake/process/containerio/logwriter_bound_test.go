package containerio

import (
	"bytes"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heapNow is the live heap after a collection.
func heapNow() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A container's output can be any size and come in writes of any size (a process printing 100 MB
// hands the log one 100 MB write if its buffer says so); what the log writer keeps between writes
// is the last line's start, under MaxLogLine, whatever came before it. The file on disk is the
// kubelet's to rotate (ReopenContainerLog); memory is cri-fake's.
func TestLogStreamKeepsLessThanALineWhateverTheWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk string // repeated to 8 MiB, then a last line without newline
	}{
		{"short lines", strings.Repeat("x", 99) + "\n"},
		{"one long line", "x"},
		{"lines longer than MaxLogLine", strings.Repeat("y", MaxLogLine+MaxLogLine/2) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, path := newLogWriter(t)
			s := w.Stream(Stdout)
			p := append(bytes.Repeat([]byte(tc.chunk), (8<<20)/len(tc.chunk)), "the start of a line"...)
			size := len(p)
			before := heapNow() - int64(cap(p))
			if _, err := s.Write(p); err != nil {
				t.Fatal(err)
			}
			p = nil
			kept := heapNow() - before
			if kept > 1<<20 {
				t.Errorf("after one write of %d MiB the open stream keeps %d KiB (bound: a line of %d KiB)", size>>20, kept>>10, MaxLogLine>>10)
			}
			s.Close()
			fi, err := os.Stat(path)
			if err != nil || fi.Size() < int64(size) {
				t.Fatalf("log file %v (%v): the %d bytes written are not all there", fi.Size(), err, size)
			}
		})
	}
}

// What the log writer allocates for a write is not its size either: each record is built in a
// buffer the writer reuses.
func TestLogStreamAllocatesLittlePerWrite(t *testing.T) {
	w, _ := newLogWriter(t)
	s := w.Stream(Stdout)
	p := bytes.Repeat([]byte(strings.Repeat("z", 200)+"\n"), (4<<20)/201)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := s.Write(p); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 1<<20 {
		t.Errorf("a write of %d MiB allocated %d KiB", len(p)>>20, a>>10)
	}
}

// The records are the ones the line discipline gives however the output is cut into writes:
// complete lines F, lines over MaxLogLine cut into P records, a line still open at the end of a
// write cut into P records once it reaches MaxLogLine, and a last line without newline written as
// P at close, as containerd writes it (TestLogWriterFormat has the named cases; this one random cuts of random output,
// against the discipline written out plainly).
func TestLogStreamRecordsMatchTheLineDiscipline(t *testing.T) {
	rnd := rand.New(rand.NewPCG(17, uint64(time.Now().UnixNano())))
	for round := range 20 {
		var data []byte
		for range rnd.IntN(40) {
			data = append(data, bytes.Repeat([]byte{'a' + byte(rnd.IntN(26))}, rnd.IntN(3*MaxLogLine))...)
			if rnd.IntN(4) != 0 {
				data = append(data, '\n')
			}
		}
		var cuts []int
		for rest := len(data); rest > 0; {
			n := min(rest, 1+rnd.IntN(2*MaxLogLine+2))
			if rnd.IntN(5) == 0 {
				n = min(rest, MaxLogLine)
			}
			cuts = append(cuts, n)
			rest -= n
		}
		w, path := newLogWriter(t)
		s := w.Stream(Stderr)
		off := 0
		for _, n := range cuts {
			if _, err := s.Write(data[off : off+n]); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		s.Close()
		got, _ := os.ReadFile(path)
		if want := lineDiscipline(data, cuts); string(got) != want {
			t.Fatalf("round %d: %d bytes in writes of %v: records differ from the line discipline's", round, len(data), cuts)
		}
	}
}

// lineDiscipline is what a log stream writes for data written in writes of the sizes cuts gives,
// computed plainly: all of the pending output in memory.
func lineDiscipline(data []byte, cuts []int) string {
	ts := fixedTime.Format(time.RFC3339Nano)
	var out strings.Builder
	rec := func(tag string, b []byte) { out.WriteString(ts + " stderr " + tag + " " + string(b) + "\n") }
	emit := func(line []byte) {
		for len(line) > MaxLogLine {
			rec("P", line[:MaxLogLine])
			line = line[MaxLogLine:]
		}
		rec("F", line)
	}
	var buf []byte
	off := 0
	for _, n := range cuts {
		buf = append(buf, data[off:off+n]...)
		off += n
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			emit(buf[:i])
			buf = buf[i+1:]
		}
		for len(buf) >= MaxLogLine {
			rec("P", buf[:MaxLogLine])
			buf = buf[MaxLogLine:]
		}
	}
	if len(buf) > 0 {
		rec("P", buf) // under MaxLogLine here: a last line without newline is partial
	}
	return out.String()
}
