package containerio

import (
	"context"
	"io"
	"sync"
)

// ContainerIO is a container main process's stdio arranged the way
// containerd's CRI plugin does it (internal/cri/io): stdout and stderr go to
// the CRI log and to every attached session, and attached sessions feed the
// process's stdin. Use Stdin/Stdout/Stderr for the Spec, Attach from the
// streaming server's Attach, and Close once the process has ended.
type ContainerIO struct {
	tty    bool
	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	out    *fanout
	err    *fanout

	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

// NewContainerIO wires a process to log (nil: no log file). stdin is the
// container config's stdin flag: without it the process reads an empty input
// and attached input is ignored. tty merges stderr into stdout.
func NewContainerIO(log *LogWriter, stdin, tty bool) *ContainerIO {
	c := &ContainerIO{tty: tty, out: &fanout{sessions: map[int]io.WriteCloser{}}, err: &fanout{sessions: map[int]io.WriteCloser{}}, done: make(chan struct{})}
	if log != nil {
		c.out.log = log.Stream(Stdout)
		c.err.log = log.Stream(Stderr)
	}
	if stdin {
		c.stdinR, c.stdinW = io.Pipe()
	}
	return c
}

// Stdin is the process's input (nil without the stdin flag).
func (c *ContainerIO) Stdin() io.Reader {
	if c.stdinR == nil {
		return nil
	}
	return c.stdinR
}

// Stdout and Stderr are the process's outputs.
func (c *ContainerIO) Stdout() io.Writer { return c.out }

// Stderr is the process's error output (with TTY the process writes
// everything to Stdout).
func (c *ContainerIO) Stderr() io.Writer { return c.err }

// Attach connects a session until the container ends, the session's input
// ends, or ctx is done. When in ends: with stdinOnce and no TTY the process's
// stdin is closed (it sees EOF) and the session keeps its output until the
// container ends; otherwise the session is detached. out and errw are
// closed when the session ends; either may be nil.
func (c *ContainerIO) Attach(ctx context.Context, in io.Reader, out, errw io.WriteCloser, stdinOnce bool) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if out != nil {
			out.Close()
		}
		if errw != nil {
			errw.Close()
		}
		return nil
	}
	c.mu.Unlock()
	var ids []func()
	if out != nil {
		ids = append(ids, c.out.add(out))
	}
	if errw != nil && !c.tty {
		ids = append(ids, c.err.add(errw))
	} else if errw != nil {
		defer errw.Close()
	}
	detach := func() {
		for _, remove := range ids {
			remove()
		}
	}
	inDone := make(chan bool, 1) // true: detach the session
	if in != nil && c.stdinW != nil {
		go func() {
			_, _ = io.Copy(c.stdinW, in)
			if stdinOnce && !c.tty {
				c.stdinW.Close()
				inDone <- false
				return
			}
			inDone <- true
		}()
	}
	for {
		select {
		case <-c.done:
			detach()
			return nil
		case <-ctx.Done():
			detach()
			return ctx.Err()
		case d := <-inDone:
			if d {
				detach()
				return nil
			}
		}
	}
}

// Close ends the container's IO after the process ended: the log streams
// are flushed (a last line without newline is written), every attached
// session ends, and the stdin pipe is closed.
func (c *ContainerIO) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	err1 := c.out.close()
	err2 := c.err.close()
	if c.stdinR != nil {
		c.stdinR.Close()
	}
	if err1 != nil {
		return err1
	}
	return err2
}

// fanout writes to the log stream and to every attached session; a session
// whose writer fails is dropped (its client went away).
type fanout struct {
	mu       sync.Mutex
	log      io.WriteCloser
	sessions map[int]io.WriteCloser
	next     int
}

func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		if _, err := f.log.Write(p); err != nil {
			return 0, err
		}
	}
	for id, w := range f.sessions {
		if _, err := w.Write(p); err != nil {
			w.Close()
			delete(f.sessions, id)
		}
	}
	return len(p), nil
}

func (f *fanout) add(w io.WriteCloser) (remove func()) {
	f.mu.Lock()
	id := f.next
	f.next++
	f.sessions[id] = w
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if w, ok := f.sessions[id]; ok {
			w.Close()
			delete(f.sessions, id)
		}
		f.mu.Unlock()
	}
}

func (f *fanout) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, w := range f.sessions {
		w.Close()
		delete(f.sessions, id)
	}
	if f.log != nil {
		return f.log.Close()
	}
	return nil
}
