package applets

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
)

// appletHexdump is busybox's hexdump in its canonical form, -C (util-linux's layout: the
// offset, sixteen bytes in hex in two groups of eight, the printable ones between bars, "*" for
// repeated lines unless -v, the total length last), with -n LENGTH and -s OFFSET over the files
// given one after another (stdin without one). Format strings (-e) are not simulated.
func appletHexdump(p *kernel.Proc) int {
	opts, files, err := libbb.Flags(p.Args[1:], "nse")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if _, ok := opts['e']; ok {
		p.Errorf("-e is not simulated (only -C)")
		return 1
	}
	limit, skip := int64(-1), int64(0)
	if v, ok := opts['n']; ok {
		if limit, err = strconv.ParseInt(v, 0, 64); err != nil || limit < 0 {
			p.Errorf("invalid number '%s'", v)
			return 1
		}
	}
	if v, ok := opts['s']; ok {
		if skip, err = strconv.ParseInt(v, 0, 64); err != nil || skip < 0 {
			p.Errorf("invalid number '%s'", v)
			return 1
		}
	}
	d := &hexDumper{w: p.Stdout, offset: skip, all: opts['v'] != ""}
	st := eachInput(p, files, func(_ int, _ string, r io.Reader) bool {
		if skip > 0 {
			n, _ := io.CopyN(io.Discard, r, skip)
			skip -= n
			if skip > 0 {
				return true
			}
		}
		if limit >= 0 {
			r = io.LimitReader(r, limit)
		}
		buf := make([]byte, 32*1024)
		for {
			if p.Step() != nil {
				return false
			}
			n, err := r.Read(buf)
			if n > 0 {
				if limit >= 0 {
					limit -= int64(n)
				}
				d.write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		return limit != 0
	})
	d.flush()
	return st
}

// hexDumper turns a byte stream into -C lines, holding at most one line.
type hexDumper struct {
	w      io.Writer
	line   []byte
	prev   []byte
	offset int64
	star   bool
	all    bool
}

func (d *hexDumper) write(b []byte) {
	for len(b) > 0 {
		n := min(16-len(d.line), len(b))
		d.line = append(d.line, b[:n]...)
		b = b[n:]
		if len(d.line) == 16 {
			d.emit()
		}
	}
}

func (d *hexDumper) emit() {
	if !d.all && d.prev != nil && len(d.line) == 16 && bytes.Equal(d.line, d.prev) {
		if !d.star {
			fmt.Fprintln(d.w, "*")
			d.star = true
		}
	} else {
		d.star = false
		var b bytes.Buffer
		fmt.Fprintf(&b, "%08x  ", d.offset)
		for i := range 16 {
			if i < len(d.line) {
				fmt.Fprintf(&b, "%02x ", d.line[i])
			} else {
				b.WriteString("   ")
			}
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, c := range d.line {
			if c < 0x20 || c > 0x7e {
				c = '.'
			}
			b.WriteByte(c)
		}
		b.WriteString("|\n")
		d.w.Write(b.Bytes())
	}
	d.offset += int64(len(d.line))
	d.prev = append(d.prev[:0], d.line...)
	d.line = d.line[:0]
}

func (d *hexDumper) flush() {
	if len(d.line) > 0 {
		d.emit()
	}
	fmt.Fprintf(d.w, "%08x\n", d.offset)
}
