package kernel

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/sched"
)

// Pipe is pipe(2) between processes of a container (a shell's pipeline): a write waits until
// the reader has taken all of it, as io.Pipe does, so a pipe holds no buffer of its own and
// nothing to charge to the container's memory. What it adds: a process that blocks on it gives
// its CPU to another thread first (cpu.go), as a process sleeping on a pipe does on a kernel;
// without that the other end, waiting for that CPU, would wait for the blocked one's quantum to
// end at each hand-off. An end blocks for the thread it is bound to (Proc.Bind); a process's
// standard streams are bound to it when it starts.
//
// A write once the reader is gone fails with EPIPE and sets Broken (SIGPIPE's default action
// ends the writer: the shell stops the pipeline element on it).
func Pipe() (*PipeReader, *PipeWriter) {
	p := &pipe{offer: make(chan []byte), took: make(chan int), closed: make(chan struct{})}
	return &PipeReader{p: p}, &PipeWriter{p: p}
}

type pipe struct {
	writing sync.Mutex  // one write at a time, so a write's bytes stay together
	offer   chan []byte // what the writer offers
	took    chan int    // how much of it the reader took

	closeOnce sync.Once
	closed    chan struct{}
	mu        sync.Mutex
	rerr      error // why the read end was closed (nil: not closed)
	werr      error // why the write end was closed
	broken    atomic.Bool
}

func (p *pipe) close(reader bool, err error) {
	p.mu.Lock()
	if reader && p.rerr == nil {
		p.rerr = err
	} else if !reader && p.werr == nil {
		p.werr = err
	}
	p.mu.Unlock()
	p.closeOnce.Do(func() { close(p.closed) })
}

// readErr is what a read of a closed pipe returns: the writer's error (io.EOF by default), or,
// when the reader closed its own end, io.ErrClosedPipe.
func (p *pipe) readErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil && p.werr != nil {
		return p.werr
	}
	return io.ErrClosedPipe
}

// writeErr is what a write to a closed pipe returns: EPIPE once the reader is gone.
func (p *pipe) writeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil && p.rerr != nil {
		p.broken.Store(true)
		return syscall.EPIPE
	}
	return io.ErrClosedPipe
}

// PipeReader is the read end of a Pipe.
type PipeReader struct {
	p  *pipe
	th *sched.Thread // whose CPU a blocked read gives up (nil: none)
}

// Read takes what a writer offers, blocking until one does or the write end is closed (EOF).
func (r *PipeReader) Read(b []byte) (int, error) {
	p := r.p
	select {
	case <-p.closed:
		return 0, p.readErr()
	default:
	}
	select {
	case w := <-p.offer:
		return r.take(b, w), nil
	default:
	}
	r.th.Idle() // nothing offered yet: it blocks
	select {
	case w := <-p.offer:
		return r.take(b, w), nil
	case <-p.closed:
		return 0, p.readErr()
	}
}

func (r *PipeReader) take(b, w []byte) int {
	n := copy(b, w)
	r.p.took <- n
	return n
}

// Close closes the read end: a write then fails with EPIPE.
func (r *PipeReader) Close() error { return r.CloseWithError(nil) }

// CloseWithError closes the read end (err is kept for the record; writers get EPIPE).
func (r *PipeReader) CloseWithError(err error) error {
	if err == nil {
		err = io.ErrClosedPipe
	}
	r.p.close(true, err)
	return nil
}

// PipeWriter is the write end of a Pipe.
type PipeWriter struct {
	p  *pipe
	th *sched.Thread
}

// Write offers b to the reader until it has taken all of it; it fails with EPIPE once the
// reader closed its end.
func (w *PipeWriter) Write(b []byte) (int, error) {
	p := w.p
	select {
	case <-p.closed:
		return 0, p.writeErr()
	default:
	}
	p.writing.Lock()
	defer p.writing.Unlock()
	n := 0
	for first := true; first || len(b) > 0; first = false {
		select {
		case p.offer <- b:
		default:
			w.th.Idle() // the reader is not there: it blocks
			select {
			case p.offer <- b:
			case <-p.closed:
				return n, p.writeErr()
			}
		}
		k := <-p.took
		b, n = b[k:], n+k
	}
	return n, nil
}

// Close closes the write end: the reader then reads EOF.
func (w *PipeWriter) Close() error { return w.CloseWithError(nil) }

// CloseWithError closes the write end; the reader then gets err (io.EOF when nil).
func (w *PipeWriter) CloseWithError(err error) error {
	if err == nil {
		err = io.EOF
	}
	w.p.close(false, err)
	return nil
}

// Broken reports whether a write found the reader gone (EPIPE).
func (w *PipeWriter) Broken() bool { return w.p.broken.Load() }

// Bind is sio as seen by p's own thread: the pipe ends among them give up p's CPU when they block.
func (p *Proc) Bind(sio Stdio) Stdio {
	return Stdio{In: bindReader(sio.In, p.th), Out: bindWriter(sio.Out, p.th), Err: bindWriter(sio.Err, p.th)}
}

// SetStdio gives p the standard streams sio, bound to its thread (Bind).
func (p *Proc) SetStdio(sio Stdio) {
	sio = p.Bind(sio)
	p.Stdin, p.Stdout, p.Stderr = sio.In, sio.Out, sio.Err
}

func bindReader(r io.Reader, th *sched.Thread) io.Reader {
	if pr, ok := r.(*PipeReader); ok && pr.th != th {
		return &PipeReader{p: pr.p, th: th}
	}
	return r
}

func bindWriter(w io.Writer, th *sched.Thread) io.Writer {
	if pw, ok := w.(*PipeWriter); ok && pw.th != th {
		return &PipeWriter{p: pw.p, th: th}
	}
	return w
}

// IsBrokenPipe reports whether err is a write to a pipe without a reader.
func IsBrokenPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrClosedPipe)
}
