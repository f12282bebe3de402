package applets

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// ddChunk is the most of a block dd really holds at once: a block of bs bytes is charged
// to the container's memory whole (what busybox's dd mallocs), but copied through a buffer
// of at most this size, so `dd bs=1G` costs cri-fake 64 KiB however big bs is.
const ddChunk = 64 << 10

// ddMaxBlock is busybox's bound on bs (ssize_t's maximum over two).
const ddMaxBlock = 1<<62 - 1

// ddSuffix splits busybox dd's number suffix (dd.c dd_suffixes) off s: its multiplier
// and the digits.
func ddSuffix(s string) (uint64, string) {
	for _, sf := range []struct {
		s string
		m uint64
	}{{"kB", 1000}, {"kD", 1000}, {"MB", 1000000}, {"MD", 1000000}, {"GB", 1000000000}, {"GD", 1000000000},
		{"c", 1}, {"w", 2}, {"b", 512}, {"k", 1024}, {"K", 1024}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, sf.s); ok {
			return sf.m, n
		}
	}
	return 1, s
}

// ddNumber parses a dd operand's number with its suffix, in [lo, hi].
func ddNumber(s string, lo, hi uint64) (uint64, bool) {
	m, digits := ddSuffix(s)
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || (n != 0 && m > hi/n) || n*m < lo || n*m > hi {
		return 0, false
	}
	return n * m, true
}

// humanBytes is busybox's make_human_readable_str(n, 1, 0): one decimal past 1024.
func humanBytes(n float64) string {
	units := "KMGTPE"
	if n < 1024 {
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
	u := -1
	for n >= 1024 && u < len(units)-1 {
		n /= 1024
		u++
	}
	return strconv.FormatFloat(n, 'f', 1, 64) + string(units[u])
}

// appletDd copies if= to of= in blocks of bs= (count=, skip= blocks), as busybox dd does,
// and reports the records on stderr (status=none: nothing, noxfer: no speed line). Its block
// buffer is charged to the container's memory (kernel.Proc.Charge): `dd bs=20M` in a
// container limited to 15 MiB is OOM-killed before it copies anything, critest's "Container
// OOM" command.
func appletDd(p *kernel.Proc) int {
	bs, count, skip := uint64(512), int64(-1), uint64(0)
	in, out, status := "", "", "" // busybox: stdin and stdout; "-" is a file's name
	for _, a := range p.Args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			p.Errorf("invalid argument '%s'", a)
			return 1
		}
		var good bool
		switch k {
		case "if":
			in, good = v, true
		case "of":
			out, good = v, true
		case "bs", "ibs", "obs":
			bs, good = ddNumber(v, 1, ddMaxBlock)
		case "count":
			var n uint64
			n, good = ddNumber(v, 0, 1<<63-1)
			count = int64(n)
		case "skip":
			skip, good = ddNumber(v, 0, 1<<63-1)
		case "status":
			status, good = v, v == "none" || v == "noxfer" || v == "progress"
		case "conv", "iflag", "oflag", "seek":
			p.Errorf("%s= is not simulated", k)
			return 1
		default:
			p.Errorf("invalid argument '%s'", a)
			return 1
		}
		if !good {
			p.Errorf("invalid number '%s'", v)
			return 1
		}
	}
	if err := p.Charge(int64(bs)); err != nil {
		p.Errorf("out of memory")
		return 1 // the OOM killer ended the container: 137 is its exit
	}
	defer p.Uncharge(int64(bs))
	r := io.NopCloser(p.Stdin)
	if in != "" && in != "/dev/stdin" {
		f, err := p.FS().Open(p.Abs(in))
		if err != nil {
			p.Errorf("can't open '%s': %s", in, vfs.Strerror(err))
			return 1
		}
		r = f
	}
	defer r.Close()
	w := io.Writer(p.Stdout)
	switch out {
	case "", "/dev/stdout":
	case "/dev/stderr":
		w = p.Stderr
	default:
		f, err := p.OpenWrite(p.Abs(out), false, 0o644)
		if err != nil {
			p.Errorf("can't open '%s': %s", out, vfs.Strerror(err))
			return 1
		}
		defer f.Close()
		w = f
	}
	buf := make([]byte, min(bs, ddChunk))
	var st ddStats
	start := time.Now()
	code := 0
	for block := uint64(0); count < 0 || st.records() < uint64(count); block++ {
		if p.Step() != nil {
			return 1
		}
		n, rerr := ddReadBlock(p, r, buf, bs, w, block < skip)
		if block >= skip && n > 0 {
			st.record(n, bs)
		}
		if p.Ctx().Err() != nil {
			return 1 // killed (its exit code is the signal's)
		}
		if rerr != nil && rerr != io.EOF {
			// busybox's full_write_or_warn and perror: "dd: NAME: strerror".
			if we, ok := rerr.(ddWriteError); ok {
				p.Errorf("%s: %s", cmp.Or(out, "standard output"), vfs.Strerror(we.err))
			} else {
				p.Errorf("%s: %s", cmp.Or(in, "standard input"), vfs.Strerror(rerr))
			}
			code = 1
			break
		}
		if rerr == io.EOF || n == 0 {
			break
		}
	}
	if status != "none" {
		fmt.Fprintf(p.Stderr, "%d+%d records in\n%d+%d records out\n", st.full, st.part, st.full, st.part)
		if status != "noxfer" {
			secs := time.Since(start).Seconds()
			rate := float64(st.bytes) / max(secs, 1e-6)
			fmt.Fprintf(p.Stderr, "%d bytes (%sB) copied, %f seconds, %sB/s\n", st.bytes, humanBytes(float64(st.bytes)), secs, humanBytes(rate))
		}
	}
	return code
}

// ddStats counts whole and partial records (every block read is written) and bytes.
type ddStats struct{ full, part, bytes uint64 }

func (s *ddStats) record(n, bs uint64) {
	s.bytes += n
	if n == bs {
		s.full++
	} else {
		s.part++
	}
}

func (s *ddStats) records() uint64 { return s.full + s.part }

type ddWriteError struct{ err error }

func (e ddWriteError) Error() string { return e.err.Error() }

// ddReadBlock reads one block of up to bs bytes through buf and writes it to w (unless
// skipping). A short read ends the block, as read(2) on a pipe does for dd.
func ddReadBlock(p *kernel.Proc, r io.Reader, buf []byte, bs uint64, w io.Writer, skipping bool) (uint64, error) {
	var n uint64
	for n < bs {
		if err := p.Step(); err != nil {
			return n, err
		}
		want := min(uint64(len(buf)), bs-n)
		k, err := r.Read(buf[:want])
		if k > 0 && !skipping {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, ddWriteError{werr}
			}
		}
		n += uint64(k)
		if err != nil {
			return n, err
		}
		if uint64(k) < want {
			return n, nil // a short read (a pipe): the block ends here, a partial record
		}
	}
	return n, nil
}
