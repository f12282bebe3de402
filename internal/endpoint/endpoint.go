// Package endpoint parses the plugin endpoints the fakes serve on ("unix:///run/plugsim/cri.sock")
// and listens on them the way containerd and the CSI drivers do: the parent directory is created,
// a stale socket file left by a crashed process is replaced, a live one is not, and the socket is
// made 0660. A socket's path must fit the kernel's sockaddr_un (MaxPathLen bytes); MkdirTemp
// makes a directory whose sockets do, whatever $TMPDIR is.
package endpoint

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MaxPathLen is the longest path a unix socket can have: sockaddr_un's sun_path less the NUL that
// ends it (107 bytes on Linux, unix(7)). A longer path fails bind(2) and connect(2) with EINVAL,
// which Go reports as "bind: invalid argument" without saying why.
const MaxPathLen = len(syscall.RawSockaddrUnix{}.Path) - 1

// CheckPath reports a socket path too long to bind or connect to.
func CheckPath(path string) error {
	if len(path) > MaxPathLen {
		return fmt.Errorf("unix socket path %q is %d bytes, the limit is %d: choose a shorter directory", path, len(path), MaxPathLen)
	}
	return nil
}

// Parse returns the socket path of a unix endpoint: "unix:///a/b.sock", "unix://a/b.sock"
// (relative), or a bare path.
func Parse(ep string) (string, error) {
	switch {
	case strings.HasPrefix(ep, "unix://"):
		ep = strings.TrimPrefix(ep, "unix://")
	case strings.Contains(ep, "://"):
		return "", fmt.Errorf("endpoint %q: only unix sockets are served (unix:///path/to.sock)", ep)
	}
	if ep == "" {
		return "", errors.New("endpoint is empty: want unix:///path/to.sock")
	}
	if err := CheckPath(ep); err != nil {
		return "", err
	}
	return ep, nil
}

// MkdirTemp creates a new directory for sockets whose names are up to longest bytes (a relative
// path such as "csi/controller.sock"), named pattern plus a random string as os.MkdirTemp does.
// It is made in os.TempDir() when such a socket fits under it, otherwise in /tmp: $TMPDIR may be
// long (a CI runner's work dir, macOS's /var/folders/...), and a socket under it would not bind.
func MkdirTemp(pattern string, longest int) (string, error) {
	// os.MkdirTemp appends a random decimal uint32: at most 10 digits.
	fits := func(base string) bool {
		return len(base)+1+len(pattern)+len(strconv.FormatUint(1<<32-1, 10))+1+longest <= MaxPathLen
	}
	base := os.TempDir()
	if !fits(base) {
		base = "/tmp"
		if !fits(base) {
			return "", fmt.Errorf("no directory short enough for a socket named %d bytes: the limit of a unix socket path is %d bytes", longest, MaxPathLen)
		}
	}
	return os.MkdirTemp(base, pattern)
}

// URL returns the unix:// form of a socket path.
func URL(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "unix://" + path
}

// Listen listens on a unix endpoint with mode 0660.
func Listen(ep string) (net.Listener, error) {
	return ListenMode(ep, 0o660)
}

// ListenMode listens on a unix endpoint and sets the socket's permissions.
func ListenMode(ep string, mode os.FileMode) (net.Listener, error) {
	path, err := Parse(ep)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// removeStale removes a socket file nobody listens on. A regular file or directory in the way is an
// error (it is not ours to delete), and so is a socket that still answers: another server owns it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by another server", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}
