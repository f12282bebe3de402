package containerio

import (
	"bytes"
	"io"
	"sync"
)

// ttyReader is a tiny line discipline for TTY mode (there is no real pty):
// canonical input with echo, CR -> LF, DEL/^H erase, ^U kill line, ^C sends
// SIGINT to the process, ^D at the start of a line is end of input. Like a
// kernel tty it consumes input as it arrives, so ^C works while the program
// is busy and not reading.
type TTY struct {
	in        io.Reader
	echo      io.Writer
	Interrupt func()

	mu    sync.Mutex
	cond  *sync.Cond
	ready []byte // completed lines not yet read
	line  []byte
	eof   bool
	once  sync.Once
}

func NewTTY(in io.Reader, echo io.Writer) *TTY {
	if in == nil {
		in = bytes.NewReader(nil)
	}
	t := &TTY{in: in, echo: echo}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// start begins consuming input; called once the interrupt hook is set.
func (t *TTY) Start() {
	t.once.Do(func() { go t.pump() })
}

func (t *TTY) pump() {
	buf := make([]byte, 256)
	for {
		n, err := t.in.Read(buf)
		t.feed(buf[:n])
		if err != nil {
			t.mu.Lock()
			t.ready = append(t.ready, t.line...)
			t.line = nil
			t.eof = true
			t.cond.Broadcast()
			t.mu.Unlock()
			return
		}
	}
}

func (t *TTY) Read(b []byte) (int, error) {
	t.Start()
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.ready) == 0 && !t.eof {
		t.cond.Wait()
	}
	if len(t.ready) > 0 {
		n := copy(b, t.ready)
		t.ready = t.ready[n:]
		return n, nil
	}
	return 0, io.EOF
}

func (t *TTY) feed(data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var echo []byte
	for _, c := range data {
		switch c {
		case '\r', '\n':
			t.line = append(t.line, '\n')
			t.ready = append(t.ready, t.line...)
			t.line = nil
			echo = append(echo, '\r', '\n')
		case 0x7f, 0x08:
			if len(t.line) > 0 {
				t.line = t.line[:len(t.line)-1]
				echo = append(echo, '\b', ' ', '\b')
			}
		case 0x15: // ^U
			for range t.line {
				echo = append(echo, '\b', ' ', '\b')
			}
			t.line = nil
		case 0x03: // ^C
			t.line = nil
			echo = append(echo, '^', 'C', '\r', '\n')
			if t.Interrupt != nil {
				go t.Interrupt()
			}
		case 0x04: // ^D
			if len(t.line) == 0 {
				t.eof = true
			} else {
				t.ready = append(t.ready, t.line...)
				t.line = nil
			}
		default:
			t.line = append(t.line, c)
			echo = append(echo, c)
		}
	}
	t.cond.Broadcast()
	if len(echo) > 0 && t.echo != nil {
		t.echo.Write(echo)
	}
}

// crlfWriter turns LF into CRLF, as a terminal's ONLCR output flag does.
type CRLFWriter struct{ W io.Writer }

func (c *CRLFWriter) Write(b []byte) (int, error) {
	if bytes.IndexByte(b, '\n') < 0 {
		return c.W.Write(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i, ch := range b {
		if ch == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, ch)
	}
	if _, err := c.W.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
