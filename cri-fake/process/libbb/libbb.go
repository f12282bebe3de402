// Package libbb is what the simulated programs of applets and netapplets
// share, as busybox's applets share its libbb: option parsing, the usage
// error, a copy that stops when the process is killed, and the pause program
// that both the pause image and agnhost run.
package libbb

import (
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// Flags splits leading single-letter options ("-la", "-n 5") from operands.
// withValue lists the options that take a value. "--" ends options.
func Flags(args []string, withValue string) (map[byte]string, []string, error) {
	set := map[byte]string{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(withValue, c) >= 0 {
				v := a[j+1:]
				if v == "" {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option requires an argument -- '%c'", c)
					}
					i++
					v = args[i]
				}
				set[c] = v
				break
			}
			set[c] = "1"
		}
	}
	return set, args[i:], nil
}

// Usage reports err on the process's stderr and returns the exit code 1.
func Usage(p *kernel.Proc, err error) int {
	p.Errorf("%v", err)
	return 1
}

// Copy copies until EOF, a write error or the end of the process.
func Copy(p *kernel.Proc, w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 32*1024)
	var n int64
	for {
		if err := p.Step(); err != nil {
			return n, err
		}
		k, err := r.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Pause is the sandbox's pause process: it sleeps until a signal;
// INT and TERM end it with 0 like pause.c's handler does.
func Pause(p *kernel.Proc) int {
	done := make(chan int, 1)
	p.SetSignalHandler(func(sig syscall.Signal) bool {
		if line, ok := PauseHandles(sig); ok {
			fmt.Fprint(p.Stderr, line)
			select {
			case done <- 0:
			default:
			}
			return true
		}
		return false
	})
	p.Idle()
	select {
	case code := <-done:
		return code
	case <-p.Ctx().Done():
		code, _ := kernel.ExitCause(p.Ctx())
		return code
	}
}

// PauseHandles tells whether pause's handler takes sig (INT and TERM, on which it exits 0), and
// the line it prints on stderr then.
func PauseHandles(sig syscall.Signal) (line string, ok bool) {
	if sig != syscall.SIGINT && sig != syscall.SIGTERM {
		return "", false
	}
	return "Shutting down, got signal: " + sigDescription(sig) + "\n", true
}

func sigDescription(sig syscall.Signal) string {
	s := sig.String()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
