package oci

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// consoleSocket is the socket `runc create|exec --console-socket` sends a terminal's master side
// to (runc's SCM_RIGHTS protocol, which containerd's console package receives the same way).
type consoleSocket struct {
	dir string
	ln  *net.UnixListener
}

// newConsoleSocket listens on a socket in a new owner-only directory under base (short, so the
// path fits a socket's 107 bytes).
func newConsoleSocket(base string) (*consoleSocket, error) {
	dir, err := os.MkdirTemp(base, "console-")
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &consoleSocket{dir: dir, ln: ln}, nil
}

func (c *consoleSocket) Path() string { return filepath.Join(c.dir, "s") }

// Receive accepts runc's connection and returns the terminal master it sends.
func (c *consoleSocket) Receive() (*os.File, error) {
	conn, err := c.ln.AcceptUnix()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(name, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("console socket: want one control message, got %d (%v)", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("console socket: want one file descriptor")
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}

// Close stops listening and removes the socket's directory.
func (c *consoleSocket) Close() {
	c.ln.Close()
	os.RemoveAll(c.dir)
}

// resize sets a terminal's window size (TIOCSWINSZ on its master).
func resize(master *os.File, width, height uint16) error {
	return unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
}
